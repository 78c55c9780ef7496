package lua

import (
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// startArg is mcp.start_arg for arg (Config.StartArg), read as memcached
// reads its proxy_arg: false when there is none; the string itself when it
// has no ':'; otherwise a table of the items between the ':'s, each
// "name_value" (name = "value"; what follows a second '_' is dropped) or a
// bare name (name = true). Empty items and items with an empty name are
// skipped.
func startArg(L *glua.LState, arg string) glua.LValue {
	if arg == "" {
		return glua.LFalse
	}
	if !strings.Contains(arg, ":") {
		return glua.LString(arg)
	}
	t := L.NewTable()
	for item := range strings.SplitSeq(arg, ":") {
		parts := strings.SplitN(item, "_", 3)
		if parts[0] == "" {
			continue
		}
		if len(parts) == 1 {
			t.RawSetString(parts[0], glua.LTrue)
		} else {
			t.RawSetString(parts[0], glua.LString(parts[1]))
		}
	}
	return t
}
