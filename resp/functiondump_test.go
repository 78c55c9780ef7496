package resp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"shardproxy/codec"
)

// Payloads of redis-server 7.0.15's FUNCTION DUMP: no library; libraries
// lib1 and ab, plain strings; one library whose code LZF compresses.
var (
	dumpNone = "\n\x00]\x9b\\@\x0f\x7f\xa2\xda"
	dumpLib1 = "\xf5@F#!lua name=lib1\nredis.register_function('f1', function() return 1 end)"
	dumpAb   = "\xf5@D#!lua name=ab\nredis.register_function('f2', function() return 2 end)"
	dumpTwo  = dumpLib1 + dumpAb + "\n\x00#\xf1\xe4\x0b\x17\x7f\x0f{"
	dumpLZF  = mustHex("f5c34048409e1f23216c7561206e616d653d6269670a72656469732e72656769737465725f66750c6e6374696f6e28276631272c20e0000e0a292072657475726e202761e04e00052720656e64290a00778bafb558918055")
)

func mustHex(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestDumpLibraries(t *testing.T) {
	for _, tc := range []struct {
		name, payload string
		libs          int // -1: not a payload
	}{
		{"none", dumpNone, 0},
		{"two plain", dumpTwo, 2},
		{"lzf", dumpLZF, 1},
		{"an integer string", "\xf5\xc0\x07" + "\xf5\xc1\x01\x02" + "\xf5\xc2\x01\x02\x03\x04" + dumpNone, 3},
		{"32-bit length", "\xf5\x80\x00\x00\x00\x02ab" + dumpNone, 1},
		{"64-bit length", "\xf5\x81\x00\x00\x00\x00\x00\x00\x00\x01a" + dumpNone, 1},
		{"short", "\n\x00", -1},
		{"bad payload", "bad_payload", -1},
		{"not a function", "\x00\x01a" + dumpNone, -1},
		{"cut string", "\xf5\x05ab" + dumpNone[:8], -1},
		{"cut lzf", dumpLZF[:40] + dumpNone, -1},
		{"unknown encoding", "\xf5\xc4" + dumpNone, -1},
		{"unknown length", "\xf5\x82" + dumpNone, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			libs, version, ok := dumpLibraries([]byte(tc.payload))
			switch {
			case tc.libs < 0 && ok:
				t.Fatalf("read %d libraries of a payload that is not one", len(libs))
			case tc.libs >= 0 && (!ok || len(libs) != tc.libs || string(version) != "\n\x00"):
				t.Fatalf("%d libraries, version %q, %v; want %d, version 10", len(libs), version, ok, tc.libs)
			}
		})
	}
}

// TestMergeFunctionDump: the first server's payload when every server has
// the same libraries, in whatever order it dumps them; else an error
// naming the servers that differ; a server's error as it is.
func TestMergeFunctionDump(t *testing.T) {
	swapped := dumpAb + dumpLib1 + "\n\x00\x01\x02\x03\x04\x05\x06\x07\x08"
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	reply := func(server, s string) codec.Reply {
		return codec.Reply{Raw: []byte(bulk(s)), Server: server}
	}
	differ := "-ERR the servers' libraries differ: those of %s are not those of a; FUNCTION RESTORE with FLUSH through the proxy makes them the same\r\n"
	for _, tc := range []struct {
		name    string
		replies []codec.Reply
		want    string
	}{
		{"none", []codec.Reply{reply("a", dumpNone), reply("b", dumpNone)}, bulk(dumpNone)},
		{"alike", []codec.Reply{reply("a", dumpTwo), reply("b", dumpTwo), reply("c", dumpTwo)}, bulk(dumpTwo)},
		{"another order", []codec.Reply{reply("a", dumpTwo), reply("b", swapped)}, bulk(dumpTwo)},
		{"one has none", []codec.Reply{reply("a", dumpTwo), reply("b", dumpNone), reply("c", dumpTwo)},
			fmt.Sprintf(differ, "b")},
		{"two differ", []codec.Reply{reply("a", dumpLZF), reply("b", dumpTwo), reply("c", dumpNone)},
			fmt.Sprintf(differ, "b, c")},
		{"unreadable alike", []codec.Reply{reply("a", "junk"), reply("b", "junk")}, bulk("junk")},
		{"unreadable differ", []codec.Reply{reply("a", "junk"), reply("b", "junk2")}, fmt.Sprintf(differ, "b")},
		{"another version", []codec.Reply{reply("a", dumpNone), reply("b", "\x0b"+dumpNone[1:])}, fmt.Sprintf(differ, "b")},
		{"an error", []codec.Reply{reply("a", dumpNone), {Raw: []byte("-LOADING Redis is loading\r\n"), Kind: codec.ReplyError}},
			"-LOADING Redis is loading\r\n"},
		{"not a string", []codec.Reply{reply("a", dumpNone), {Raw: []byte(":1\r\n")}},
			"-ERR the servers' replies to FUNCTION DUMP disagree or are not what it answers\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, n, err := parse(t, keyspaceOpts, mb("FUNCTION", "DUMP"))
			if err != nil {
				t.Fatal(describeRequest(req, n, err))
			}
			subs := slices.Repeat([]*codec.Request{req}, len(tc.replies))
			if got := string(dialect.Merge([]byte("x"), req, subs, nil, tc.replies)); got != "x"+tc.want {
				t.Fatalf("got %q, want %q", got, "x"+tc.want)
			}
		})
	}
}

// FuzzDumpLibraries: no panic; a payload read is its libraries and its
// trailer, and holds the same libraries as itself with them reversed.
func FuzzDumpLibraries(f *testing.F) {
	for _, s := range []string{dumpNone, dumpTwo, dumpLZF, "\xf5\xc0\x07" + dumpNone, "\xf5\x80\x00\x00\x00\x02ab" + dumpNone} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		libs, version, ok := dumpLibraries(payload)
		if !ok {
			return
		}
		trailer := payload[len(payload)-dumpTrailer:]
		if !bytes.Equal(bytes.Join(append(slices.Clone(libs), trailer), nil), payload) || !bytes.Equal(version, trailer[:2]) {
			t.Fatalf("%q: libraries %q and version %q are not the payload", payload, libs, version)
		}
		slices.Reverse(libs)
		reversed := bytes.Join(append(libs, trailer), nil)
		if !sameLibraries(payload, reversed) {
			t.Fatalf("%q and %q: not the same libraries", payload, reversed)
		}
	})
}
