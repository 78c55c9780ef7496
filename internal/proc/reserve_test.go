//go:build unix

package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// childPortsEnv, when set, makes TestFreePortAcrossProcesses the child: it
// lists the ports given there that it could reserve.
const childPortsEnv = "PROC_CHILD_PORTS"

// TestFreePortAcrossProcesses checks that a port FreePort handed out in this
// process cannot be reserved by another test process while this one lives,
// and that a port nobody holds can be.
func TestFreePortAcrossProcesses(t *testing.T) {
	if list := os.Getenv(childPortsEnv); list != "" {
		var got []string
		for _, f := range strings.Split(list, ",") {
			port, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			if reserve(port) {
				got = append(got, f)
			}
		}
		os.Stdout.WriteString("reserved:" + strings.Join(got, ",") + "\n")
		return
	}
	var held []int
	for range 3 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, port)
	}
	// FreePort draws from 20000 and above, so no test process holds port 1.
	const unheld = 1
	args := make([]string, 0, len(held)+1)
	for _, p := range append(held, unheld) {
		args = append(args, strconv.Itoa(p))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), childPortsEnv+"="+strings.Join(args, ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := "reserved:" + strconv.Itoa(unheld) + "\n"
	if !strings.Contains(string(out), want) {
		t.Fatalf("child reserved other ports than the one this process does not hold (%d) of %v:\n%s", unheld, args, out)
	}
}
