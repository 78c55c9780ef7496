package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"shardproxy/backend"
)

// ConfigError is a route file that cannot be loaded: a syntax error, a
// missing mcp_config_pools or mcp_config_routes, an error raised while they
// run (a bad option, a wrong argument).
type ConfigError struct {
	// File is the route file's path.
	File string
	// Line is the line the error is about; 0 when it is about the whole
	// file (a missing function).
	Line int
	// Msg says what is wrong.
	Msg string
}

// Error returns "lua: FILE:LINE: MSG" (or "lua: FILE: MSG" without a line).
func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("lua: %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("lua: %s: %s", e.File, e.Msg)
}

// wireError is an error whose text is what the client is told after the
// protocol's error prefix ("SERVER_ERROR lua failure").
type wireError string

func (e wireError) Error() string { return string(e) }

// Reply texts of requests the script could not answer.
const (
	errLuaFailure  = wireError("lua failure")
	errLuaTimeout  = wireError("lua timeout")
	errLuaMemory   = wireError("lua memory limit")
	errBadResponse = wireError("bad response")
	errClosed      = wireError("lua router closed")
	// errBackendFailure is memcached proxy's one word for every backend
	// failure (the cause goes to the log and to "watch proxyevents").
	errBackendFailure = wireError("backend failure")
	// errDepthLimit fails a request to a backend over its depth limit;
	// the client sees errBackendFailure, as memcached answers it.
	errDepthLimit = wireError("backend failure: depth limit")
)

// clientWords returns the error whose text the client is told for a
// failed backend call: on a memcache pool memcached proxy's
// "backend failure", whatever the cause; on a Redis pool the cause
// ("backend failure: timeout").
func (r *Router) clientWords(err error) error {
	var be *backend.Error
	if !r.cfg.Redis && (errors.As(err, &be) || err == errDepthLimit) {
		return errBackendFailure
	}
	return err
}

// scriptMessage is what an error raised by route code at request time
// says: its message, with the file and line, after why the watchdog
// stopped it if it did.
func scriptMessage(err error) string {
	msg := luaMessage(err)
	var be *boundError
	if errors.As(err, &be) {
		msg = be.stop.explain(msg)
	}
	return msg
}

// luaMessage is the message of an error Lua raised (the value given to
// error(), with its "FILE:LINE: " prefix), or err's text for any other.
func luaMessage(err error) string {
	var ae *glua.ApiError
	if errors.As(err, &ae) {
		return ae.Object.String()
	}
	return err.Error()
}

// syntaxError turns a parse or compile error into a *ConfigError.
func syntaxError(file string, src []byte, err error) error {
	var pe *parse.Error
	if errors.As(err, &pe) {
		line := pe.Pos.Line
		msg := strings.TrimSpace(pe.Message)
		if line == parse.EOF {
			line = strings.Count(strings.TrimRight(string(src), " \t\r\n"), "\n") + 1 // the last line
			return &ConfigError{File: file, Line: line, Msg: msg + " at end of file"}
		}
		if pe.Token != "" {
			msg += fmt.Sprintf(" near '%s'", pe.Token)
		}
		return &ConfigError{File: file, Line: line, Msg: msg}
	}
	var ce *glua.CompileError
	if errors.As(err, &ce) {
		return &ConfigError{File: file, Line: ce.Line, Msg: ce.Message}
	}
	return &ConfigError{File: file, Msg: err.Error()}
}

// runError turns an error raised while running the script into a
// *ConfigError, taking the line from the "FILE:LINE: " prefix Lua puts on
// error messages.
func runError(file, stage string, err error) error {
	msg := luaMessage(err)
	var be *boundError
	if errors.As(err, &be) { // "FILE:LINE: context canceled" says why
		msg = strings.Replace(strings.Replace(msg, context.DeadlineExceeded.Error(), be.stop.Error(), 1),
			context.Canceled.Error(), be.stop.Error(), 1)
	}
	line, rest := splitWhere(file, msg)
	return &ConfigError{File: file, Line: line, Msg: stage + ": " + rest}
}

// splitWhere splits "FILE:LINE: msg" into LINE and msg; a message without
// that prefix comes back whole with line 0.
func splitWhere(file, msg string) (int, string) {
	rest, ok := strings.CutPrefix(msg, file+":")
	if !ok {
		return 0, msg
	}
	num, after, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, msg
	}
	line, err := strconv.Atoi(num)
	if err != nil {
		return 0, msg
	}
	return line, strings.TrimSpace(after)
}
