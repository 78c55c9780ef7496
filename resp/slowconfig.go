package resp

import (
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// The proxy's slowlog is a pool's, not a server's (SLOWLOG answers from
// it), so the parameters that rule Redis's slowlog rule it too: CONFIG
// SET slowlog-log-slower-than (microseconds; -1 keeps none, 0 every
// request) and slowlog-max-len go to the servers as every CONFIG SET does
// and set the pool's slowlog (codec.SlowlogEnv) before they are sent,
// their values checked first as redis-server checks them; CONFIG GET
// answers the pool's values for them (mergeConfigGet). The parser marks
// such a request WithLocal, and AddLocal does the rest.

// The parameters of the proxy's slowlog, as Redis names them.
const (
	paramSlowerThan = "slowlog-log-slower-than"
	paramSlowMaxLen = "slowlog-max-len"
)

// slowParams are the slowlog's parameters and the least value each
// takes (Redis's bounds: up to LLONG_MAX and LONG_MAX).
var slowParams = [...]struct {
	name  string
	least int64
}{{paramSlowerThan, -1}, {paramSlowMaxLen, 0}}

// checkSlowlogSet checks the slowlog's values in the CONFIG SET being
// parsed (parameter and value pairs from the third argument): the error
// redis-server answers the first bad one with, or "", and whether the
// request sets one.
func (p *parser) checkSlowlogSet() (reply string, sets bool) {
	for i := 2; i+1 < p.argc(); i += 2 {
		for _, sp := range slowParams {
			if !equalFold(p.arg(i), sp.name) {
				continue
			}
			sets = true
			n, ok := parseInt(p.arg(i + 1))
			switch {
			case !ok:
				return configSetFailed(sp.name, "argument couldn't be parsed into an integer"), true
			case n < sp.least:
				return configSetFailed(sp.name, "argument must be between "+strconv.FormatInt(sp.least, 10)+
					" and "+strconv.FormatInt(math.MaxInt64, 10)+" inclusive"), true
			}
		}
	}
	return "", sets
}

// configSetFailed is redis-server's refusal of a CONFIG SET's value.
func configSetFailed(param, why string) string {
	return errorLine("CONFIG SET failed (possibly related to argument '" + param + "') - " + why)
}

// getsSlowlog reports whether a pattern of the CONFIG GET being parsed
// matches a parameter of the slowlog's.
func (p *parser) getsSlowlog() bool {
	for i := 2; i < p.argc(); i++ {
		for _, sp := range slowParams {
			if configMatch(p.arg(i), sp.name) {
				return true
			}
		}
	}
	return false
}

// configMatch reports whether CONFIG GET's pattern matches the parameter
// name, in any case: * any run, ? any character, [...] a class, \ an
// escape, as redis-server's stringmatch.
func configMatch(pattern []byte, name string) bool {
	ok, err := path.Match(strings.ToLower(string(pattern)), name)
	return ok && err == nil
}

// addSlowlogConfig does AddLocal's part for a CONFIG request: a SET's
// slowlog values applied to env's slowlog, a GET's stored after the wire
// in req.Buf (name and value pairs as bulk strings, from req.Arg) for
// mergeConfigGet.
func addSlowlogConfig(req *codec.Request, env codec.Env) {
	sl, ok := env.(codec.SlowlogEnv)
	if !ok {
		return
	}
	args := wireArgs(req.Wire)
	if req.Cmd == cmdConfigSet {
		for i := 0; i+1 < len(args); i += 2 {
			n, ok := parseInt(args[i+1])
			switch {
			case !ok:
			case equalFold(args[i], paramSlowerThan):
				sl.SetSlowlogThreshold(microsToDuration(n))
			case equalFold(args[i], paramSlowMaxLen):
				sl.SetSlowlogMaxLen(int(min(n, math.MaxInt32)))
			}
		}
		return
	}
	threshold, maxLen := sl.SlowlogSettings()
	values := [...]int64{-1, int64(maxLen)}
	if threshold >= 0 {
		values[0] = threshold.Microseconds()
	}
	req.Arg = len(req.Buf)
	for i, sp := range slowParams {
		for _, pat := range args {
			if configMatch(pat, sp.name) {
				req.Buf = redcon.AppendBulkString(req.Buf, sp.name)
				req.Buf = redcon.AppendBulkString(req.Buf, strconv.FormatInt(values[i], 10))
				break
			}
		}
	}
}

// microsToDuration is n microseconds, -1 (and less) a negative duration,
// the largest duration past it.
func microsToDuration(n int64) time.Duration {
	switch {
	case n < 0:
		return -1
	case n > math.MaxInt64/int64(time.Microsecond):
		return math.MaxInt64
	}
	return time.Duration(n) * time.Microsecond
}

// localConfigFields returns the name and value frames addSlowlogConfig
// stored in a CONFIG GET request, in turn.
func localConfigFields(req *codec.Request) [][]byte {
	if req.Arg <= 0 || req.Arg > len(req.Buf) {
		return nil
	}
	var out [][]byte
	for rest := req.Buf[req.Arg:]; len(rest) > 0; {
		n := nextValue(rest)
		if n == 0 {
			return out
		}
		out = append(out, rest[:n])
		rest = rest[n:]
	}
	return out
}
