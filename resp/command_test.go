package resp

import (
	"slices"
	"strings"
	"testing"

	"shardproxy/codec"
)

// keySamples are requests and the keys the proxy routes them by; the
// parity test checks each against redis-server's COMMAND GETKEYS.
var keySamples = []struct {
	args []string
	keys []string
}{
	{[]string{"GET", "k"}, []string{"k"}},
	{[]string{"SET", "k", "v", "EX", "10"}, []string{"k"}},
	{[]string{"MGET", "a", "b", "a"}, []string{"a", "b", "a"}},
	{[]string{"MSET", "a", "1", "b", "2"}, []string{"a", "b"}},
	{[]string{"MSETNX", "a", "1", "b", "2"}, []string{"a", "b"}},
	{[]string{"DEL", "a", "b"}, []string{"a", "b"}},
	{[]string{"EXISTS", "a", "a"}, []string{"a", "a"}},
	{[]string{"RENAME", "a", "b"}, []string{"a", "b"}},
	{[]string{"SMOVE", "a", "b", "m"}, []string{"a", "b"}},
	{[]string{"LMOVE", "a", "b", "LEFT", "RIGHT"}, []string{"a", "b"}},
	{[]string{"BITOP", "AND", "d", "a", "b"}, []string{"d", "a", "b"}},
	{[]string{"PFMERGE", "d", "a", "b"}, []string{"d", "a", "b"}},
	{[]string{"SINTERSTORE", "d", "a", "b"}, []string{"d", "a", "b"}},
	{[]string{"COPY", "a", "b", "REPLACE"}, []string{"a", "b"}},
	{[]string{"GEOSEARCHSTORE", "d", "s", "FROMMEMBER", "m", "BYRADIUS", "1", "km"}, []string{"d", "s"}},
	{[]string{"HSET", "h", "f", "v"}, []string{"h"}},
	{[]string{"OBJECT", "ENCODING", "k"}, []string{"k"}},
	{[]string{"MEMORY", "USAGE", "k"}, []string{"k"}},
	{[]string{"XINFO", "GROUPS", "s"}, []string{"s"}},
	{[]string{"XGROUP", "CREATE", "s", "g", "$"}, []string{"s"}},
	// Movable keys.
	{[]string{"EVAL", "return 1", "2", "a", "b", "x"}, []string{"a", "b"}},
	{[]string{"EVALSHA", "abc", "1", "a"}, []string{"a"}},
	{[]string{"EVAL_RO", "return 1", "0"}, nil},
	{[]string{"EVAL", "return 1", "3", "a"}, nil},
	{[]string{"EVAL", "return 1", "-1", "a"}, nil},
	{[]string{"FCALL", "f", "1", "a", "x"}, []string{"a"}},
	{[]string{"ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"}, []string{"d", "a", "b"}},
	{[]string{"ZINTERSTORE", "d", "1", "a"}, []string{"d", "a"}},
	{[]string{"ZDIFFSTORE", "d", "2", "a", "b"}, []string{"d", "a", "b"}},
	{[]string{"ZUNION", "2", "a", "b", "WITHSCORES"}, []string{"a", "b"}},
	{[]string{"ZINTERCARD", "2", "a", "b", "LIMIT", "1"}, []string{"a", "b"}},
	{[]string{"SINTERCARD", "2", "a", "b"}, []string{"a", "b"}},
	{[]string{"LMPOP", "2", "a", "b", "LEFT"}, []string{"a", "b"}},
	{[]string{"ZMPOP", "1", "a", "MIN", "COUNT", "2"}, []string{"a"}},
	{[]string{"XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"}, []string{"s1", "s2"}},
	{[]string{"XREAD", "STREAMS", "streams", "0"}, []string{"streams"}},
	{[]string{"XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", ">"}, []string{"s"}},
	{[]string{"SORT", "k", "LIMIT", "0", "1", "GET", "store", "BY", "w_*", "STORE", "d1", "STORE", "d2"}, []string{"k", "d2"}},
	{[]string{"SORT", "k", "ALPHA"}, []string{"k"}},
	{[]string{"SORT_RO", "k", "BY", "w_*"}, []string{"k"}},
	{[]string{"GEORADIUS", "g", "1", "2", "10", "km", "STORE", "d", "STOREDIST", "e"}, []string{"g", "d", "e"}},
	{[]string{"GEORADIUS", "g", "1", "2", "10", "km", "STOREDIST", "e", "STORE", "d", "STORE", "f"}, []string{"g", "d", "e"}},
	{[]string{"GEORADIUS", "g", "1", "2", "10", "km", "ASC", "STORE"}, []string{"g"}},
	{[]string{"GEORADIUSBYMEMBER", "g", "m", "10", "km", "STORE", "d"}, []string{"g", "d"}},
}

func TestKeyPositions(t *testing.T) {
	for _, tc := range keySamples {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			req, n, err := parse(t, codec.Options{}, mb(tc.args...))
			if err != nil {
				t.Fatalf("%s", describeRequest(req, n, err))
			}
			var keys []string
			for _, k := range req.Keys {
				keys = append(keys, string(k))
			}
			if !slices.Equal(keys, tc.keys) {
				t.Fatalf("keys %q, want %q", keys, tc.keys)
			}
		})
	}
}

// TestCommandTable checks the generated table's invariants.
func TestCommandTable(t *testing.T) {
	multi := []string{"del", "exists", "mget", "mset", "touch", "unlink"}
	var gotMulti []string
	for i := range commandTable {
		c := &commandTable[i]
		if i > 0 && commandTable[i-1].name >= c.name {
			t.Errorf("table not sorted at %s", c.name)
		}
		if lookup([]byte(c.name)) != i+1 || CommandName(i+1) != c.name {
			t.Errorf("%s does not look up to itself", c.name)
		}
		for _, other := range []string{c.name + "x", c.name[:len(c.name)-1], "x" + c.name} {
			if cmd := lookup(other); cmd != 0 && commandTable[cmd-1].name != other {
				t.Errorf("%q looks up to %s", other, commandTable[cmd-1].name)
			}
		}
		if c.name != strings.ToLower(c.name) || c.arity == 0 {
			t.Errorf("%s: bad name or arity %d", c.name, c.arity)
		}
		if parent, _, ok := strings.Cut(c.name, "|"); ok {
			if p := commandOf(lookup(parent)); p == nil || p.class != classContainer {
				t.Errorf("%s: container %s missing", c.name, parent)
			}
		}
		switch c.class {
		case classUnsupported:
			if c.reason == "" {
				t.Errorf("%s: unsupported without a reason", c.name)
			}
		case classLocal:
			if c.local == localNone {
				t.Errorf("%s: local without a handler", c.name)
			}
		case classKey:
			if c.keys == keysChannel { // PUBLISH: COMMAND reports no key
				break
			}
			if c.keys != keysRange || c.first <= 0 || c.first != c.last {
				t.Errorf("%s: one key, but keys %d..%d", c.name, c.first, c.last)
			}
		case classMulti:
			gotMulti = append(gotMulti, c.name)
		case classSame:
			if c.keys == keysRange && (c.first <= 0 || c.first == c.last) {
				t.Errorf("%s: same-server, but keys %d..%d", c.name, c.first, c.last)
			}
		}
		if c.local != localNone && c.class != classLocal {
			t.Errorf("%s: handler on a %d command", c.name, c.class)
		}
	}
	if !slices.Equal(gotMulti, multi) {
		t.Errorf("split commands %q, want %q", gotMulti, multi)
	}
	if CommandName(0) != "" || CommandName(len(commandTable)+1) != "" {
		t.Error("CommandName of no command is not empty")
	}
}
