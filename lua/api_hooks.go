package lua

import (
	"errors"
	"strings"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// hookTable maps commands to handlers for one listener tag (or none).
type hookTable struct {
	mc    [cmdSize]*glua.LFunction // memcache, by command number
	named map[string]hookEntry     // Redis, by command name
	any   hookEntry                // Redis CMD_ANY
	keyed hookEntry                // Redis CMD_ANY_STORAGE
}

// hookEntry is a Redis handler and when it was attached: a later
// CMD_ANY or CMD_ANY_STORAGE overrides an earlier named attach, as
// memcached's attach loop overwrites every slot it covers.
type hookEntry struct {
	fn  *glua.LFunction
	seq int
}

// hooks are the handlers mcp.attach set in one worker state.
type hooks struct {
	base   hookTable
	tagged map[string]*hookTable
	seq    int
	count  int
}

// attach sets fn for cmd (a CMD_* value, or a command name) under tag.
func (h *hooks) attach(cmd glua.LValue, fn *glua.LFunction, tag string, redis bool) error {
	t := &h.base
	if tag != "" {
		if h.tagged == nil {
			h.tagged = map[string]*hookTable{}
		}
		if h.tagged[tag] == nil {
			h.tagged[tag] = &hookTable{}
		}
		t = h.tagged[tag]
	}
	h.seq++
	h.count++
	if redis {
		return t.attachRedis(cmd, fn, h.seq)
	}
	return t.attachMemcache(cmd, fn)
}

func (t *hookTable) attachMemcache(cmd glua.LValue, fn *glua.LFunction) error {
	n := 0
	switch v := cmd.(type) {
	case glua.LNumber:
		n = int(v)
	case glua.LString:
		n = mcCommandNumber(strings.ToLower(string(v)))
	}
	first, end := n, n+1
	switch {
	case n == cmdAny:
		first, end = 1, cmdSize
	case n == cmdAnyStorage:
		first, end = 1, cmdEndStorage
	case n < 1 || n >= cmdSize || n == cmdEndStorage:
		return errors.New("mcp.attach: unknown command " + glua.LVAsString(cmd))
	}
	for x := first; x < end; x++ {
		if x != cmdMN { // mn cannot be overridden: it flushes client pipelines
			t.mc[x] = fn
		}
	}
	return nil
}

func (t *hookTable) attachRedis(cmd glua.LValue, fn *glua.LFunction, seq int) error {
	e := hookEntry{fn: fn, seq: seq}
	switch v := cmd.(type) {
	case glua.LNumber:
		switch int(v) {
		case cmdAny:
			t.any = e
		case cmdAnyStorage:
			t.keyed = e
		default:
			return errors.New("mcp.attach: a Redis pool attaches command names (mcp.CMD_GET is \"get\"), mcp.CMD_ANY or mcp.CMD_ANY_STORAGE")
		}
	case glua.LString:
		if t.named == nil {
			t.named = map[string]hookEntry{}
		}
		t.named[strings.ToLower(string(v))] = e
	default:
		return errors.New("mcp.attach: bad command " + glua.LVAsString(cmd))
	}
	return nil
}

// lookup returns the handler for req: the one attached under the pool's
// tag, else the untagged one; nil when there is none.
func (h *hooks) lookup(req *codec.Request, redis bool, tag string) *glua.LFunction {
	if tag != "" {
		if t := h.tagged[tag]; t != nil {
			if fn := t.find(req, redis); fn != nil {
				return fn
			}
		}
	}
	return h.base.find(req, redis)
}

func (t *hookTable) find(req *codec.Request, redis bool) *glua.LFunction {
	if !redis {
		if n := mcCommandNumber(req.Name); n > 0 {
			return t.mc[n]
		}
		return nil
	}
	best := t.named[req.Name]
	if len(req.Keys) > 0 && t.keyed.seq > best.seq {
		best = t.keyed
	}
	if t.any.seq > best.seq {
		best = t.any
	}
	return best.fn
}
