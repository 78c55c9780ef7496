package lua

import (
	"time"

	glua "github.com/yuin/gopher-lua"
)

// processStart is the fixed point mcp.time_mono_millis counts from. Go's
// time.Since reads the monotonic clock, so a wall clock step does not move
// it.
var processStart = time.Now()

// timeRealMillis is mcp.time_real_millis(): the wall clock in milliseconds
// since the Unix epoch. Lua numbers are float64 here; whole milliseconds
// stay exact up to 2^53, so the value reads as an integer.
func timeRealMillis(L *glua.LState) int {
	L.Push(glua.LNumber(time.Now().UnixMilli()))
	return 1
}

// timeMonoMillis is mcp.time_mono_millis(): milliseconds since the process
// started, never decreasing.
func timeMonoMillis(L *glua.LState) int {
	L.Push(glua.LNumber(time.Since(processStart).Milliseconds()))
	return 1
}
