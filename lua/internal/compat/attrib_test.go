package compat

import "testing"

func TestStripAttribs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"local X <const> = 1", "local X         = 1"},
		{"local a <const>, b < close > = 1, 2", "local a        , b           = 1, 2"},
		{"local a<const>=1", "local a       =1"},
		{"local function f() end", "local function f() end"},
		{"if a <const> b then end", "if a <const> b then end"}, // a comparison, not a local
		{"local s = '<const>'", "local s = '<const>'"},
		{"-- local x <const> = 1\nlocal y <const> = 2", "-- local x <const> = 1\nlocal y         = 2"},
		{"--[[ local x <const> ]] local y <close> = f()", "--[[ local x <const> ]] local y         = f()"},
		{"local s = [==[\nlocal x <const> = 1]==]", "local s = [==[\nlocal x <const> = 1]==]"},
		{"local x <other> = 1", "local x <other> = 1"},
		{"xlocal y <const> = 1", "xlocal y <const> = 1"},
		{"local x\n<const> = 1", "local x\n        = 1"},
	} {
		if got := string(StripAttribs([]byte(tc.in))); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
