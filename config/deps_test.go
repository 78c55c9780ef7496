package config

import (
	"os/exec"
	"strings"
	"testing"
)

// config imports only the standard library and gopkg.in/yaml.v3.
func TestDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "shardproxy/config" && dep != "gopkg.in/yaml.v3" {
			t.Errorf("config depends on %s; it may import only the standard library and gopkg.in/yaml.v3", dep)
		}
	}
}
