package resp

import (
	"slices"
	"strings"
	"testing"

	"shardproxy/codec"
)

func TestScriptCalls(t *testing.T) {
	for _, tc := range []struct {
		script string
		names  []string
		ok     bool
	}{
		{"redis.call('set', KEYS[1], 'x')", []string{"set"}, true},
		{`return redis.pcall( "PING" )`, []string{"ping"}, true},
		{"redis.call('SET', KEYS[1], 1) return redis.call('Get', KEYS[1])", []string{"set", "get"}, true},
		{"return 1", nil, true},
		{"return KEYS[1]..ARGV[1]", nil, true},
		{"redis.call('object', 'encoding', KEYS[1])", []string{"object"}, true},
		// The name made at run time, or redis.call reached another way.
		{"redis.call('g'..'et', KEYS[1])", nil, false},
		{"redis.call(ARGV[1], KEYS[1])", nil, false},
		{"local f = redis.call; return f('get', KEYS[1])", nil, false},
		{"return redis['call']('get', KEYS[1])", nil, false},
		{"return _G.redis.call('get', KEYS[1])", nil, false},
		{"return loadstring('return 1')()", nil, false},
		{"local r = redis return r.call('get', KEYS[1])", nil, false},
		{"redis.call([[get]], KEYS[1])", nil, false},
		{"redis.call('get'", nil, false},
		{"redis.call('ge\\116', KEYS[1])", nil, false},
		{"redis.log(redis.LOG_WARNING, 'x')", nil, false},
		// Names that only contain the words are names of their own.
		{"local myredis = 1 local loader = 2 return myredis + loader", nil, true},
	} {
		names, ok := ScriptCalls([]byte(tc.script))
		if ok != tc.ok || (ok && !slices.Equal(names, tc.names)) {
			t.Errorf("ScriptCalls(%q) = %q, %v; want %q, %v", tc.script, names, ok, tc.names, tc.ok)
		}
	}
}

func TestEvalScript(t *testing.T) {
	wire := []byte("*4\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n1\r\n$1\r\nk\r\n")
	if got := EvalScript(&codec.Request{Name: "eval", Wire: wire}); string(got) != "return 1" {
		t.Errorf("EVAL: %q", got)
	}
	if got := EvalScript(&codec.Request{Name: "evalsha", Wire: wire}); got != nil {
		t.Errorf("EVALSHA: %q", got)
	}
}

// FuzzScriptCalls: any text is read without a panic, and a text read
// whole names only commands it holds.
func FuzzScriptCalls(f *testing.F) {
	for _, s := range []string{
		"redis.call('set', KEYS[1], 'x')", `redis.pcall("ping")`, "redis.call('g'..'et')",
		"local f = redis.call", "redis.call(", "redis", "redis.call('", "_G", "return 1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script string) {
		names, ok := ScriptCalls([]byte(script))
		if !ok {
			return
		}
		for _, n := range names {
			if n == "" || !strings.Contains(strings.ToLower(script), n) {
				t.Fatalf("%q: name %q", script, n)
			}
		}
	})
}
