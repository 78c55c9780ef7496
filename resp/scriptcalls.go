package resp

import (
	"bytes"

	"shardproxy/codec"
)

// A client with CLIENT TRACKING on has the declared keys of a script it
// runs tracked only when the script calls a read-only command (Redis
// 7.0's rule): a script that only writes tracks nothing, and a tracking
// client that ran it gets no invalidation when the keys change. The
// proxy cannot watch a script run; ScriptCalls reads what the script's
// text shows instead, and where it shows less than everything, the
// caller takes the script for a read.

// reachesServer are the names through which a Lua script could reach
// redis.call without writing "redis.call(" or "redis.pcall(": the
// global table, code made from a string, the environment and the raw
// and debug accessors.
var reachesServer = [][]byte{
	[]byte("_G"), []byte("load"), []byte("loadstring"), []byte("dofile"), []byte("require"),
	[]byte("getfenv"), []byte("setfenv"), []byte("rawget"), []byte("debug"),
	[]byte("getmetatable"), []byte("setmetatable"),
}

// ScriptCalls returns the names of the commands script (the Lua text of
// an EVAL) calls, lower-case, when the text shows every one: each use of
// redis is redis.call or redis.pcall with the command's name as a
// literal first argument, and nothing else that could reach the server
// (reachesServer) appears as a name. ok is false otherwise: a name made
// at run time, redis.call kept in a variable, a long-bracket string.
// Names in comments or strings count as uses: more is read, never less.
func ScriptCalls(script []byte) (names []string, ok bool) {
	for i := 0; i < len(script); {
		c := script[i]
		if !isNameStart(c) || (i > 0 && (isNameChar(script[i-1]) || script[i-1] == '.')) {
			i++
			continue
		}
		j := i
		for j < len(script) && isNameChar(script[j]) {
			j++
		}
		word := script[i:j]
		for _, w := range reachesServer {
			if bytes.Equal(word, w) {
				return nil, false
			}
		}
		if !bytes.Equal(word, []byte("redis")) {
			i = j
			continue
		}
		name, next, found := literalCall(script, j)
		if !found {
			return nil, false
		}
		names = append(names, name)
		i = next
	}
	return names, true
}

// literalCall reads, at script[i:] just after "redis", ".call(" or
// ".pcall(" and a quoted command name followed by ',' or ')'; it returns
// the name, lower-case, and where the reading stopped.
func literalCall(script []byte, i int) (string, int, bool) {
	rest := script[i:]
	switch {
	case bytes.HasPrefix(rest, []byte(".call")):
		i += len(".call")
	case bytes.HasPrefix(rest, []byte(".pcall")):
		i += len(".pcall")
	default:
		return "", 0, false
	}
	i = skipSpace(script, i)
	if i >= len(script) || script[i] != '(' {
		return "", 0, false
	}
	name, end, ok := quotedName(script, skipSpace(script, i+1))
	if !ok {
		return "", 0, false
	}
	k := skipSpace(script, end)
	if k >= len(script) || (script[k] != ',' && script[k] != ')') {
		return "", 0, false
	}
	return name, k, true
}

// quotedName reads a command's name in quotes at script[i:], lower-case,
// and returns where it ends (after the closing quote).
func quotedName(script []byte, i int) (string, int, bool) {
	if i >= len(script) || (script[i] != '\'' && script[i] != '"') {
		return "", 0, false
	}
	quote, start := script[i], i+1
	end := start
	for end < len(script) && script[end] != quote {
		if !isNameChar(script[end]) && script[end] != '|' && script[end] != '-' {
			return "", 0, false
		}
		end++
	}
	if end == start || end >= len(script) {
		return "", 0, false
	}
	return string(bytes.ToLower(script[start:end])), end + 1, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

func isNameStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || ('0' <= c && c <= '9') }

// EvalScript returns the script text of an EVAL or EVAL_RO request, or
// nil for any other (EVALSHA and FCALL name code the proxy does not see).
func EvalScript(req *codec.Request) []byte {
	if req.Name != "eval" && req.Name != "eval_ro" {
		return nil
	}
	if args := wireArgv(req.Wire); len(args) > 1 {
		return args[1]
	}
	return nil
}
