package resp

import (
	"strconv"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// This file checks a framed request the way redis-server's processCommand
// does (command name, subcommand, arity, then authentication, in that
// order and with its wording), applies the proxy's own rules (denied and
// unsupported commands) and builds the codec.Request.

// request turns the framed request in frame (whose arguments p.args
// holds) into req, or rejects it. It returns the bytes used: len(frame).
func (p *parser) request(frame []byte, req *codec.Request) (int, error) {
	n := len(frame)
	name := p.arg(0)
	if equalFold(name, "post") || equalFold(name, "host:") {
		// Someone speaks HTTP to us: redis-server drops them without a word.
		return 0, rejectFatal("", n)
	}
	cmd, c, reply := p.resolve()
	if reply == "" {
		reply = p.refusal(cmd, c)
	}
	if reply != "" {
		return 0, reject(reply, n)
	}
	cls := c.calledClass()
	switch cls {
	case classLocal:
		return p.local(frame, req, cmd, c)
	case classServer:
		return p.scanRequest(n, req, cmd, c)
	}
	return p.keyed(frame, req, cmd, c, cls)
}

// calledClass is the class of the command as called: a container called
// without a subcommand has its bare class.
func (c *command) calledClass() class {
	if c.class == classContainer {
		return c.bare
	}
	return c.class
}

// refusal returns the error reply to a known command the session may not
// run, in redis-server's order (authentication first), then the proxy's
// rules: denied for the pool, not supported by it.
func (p *parser) refusal(cmd int, c *command) string {
	switch {
	case p.authRequired() && !c.noAuth:
		return replyNoAuth
	case p.deny != nil && p.deny[cmd]: // a container's subcommands are marked with it (denyTable)
		return errorLine(displayName(c.name) + " is disabled for this pool")
	case c.every && !p.keyspace || c.serverConfig && !p.config || c.clusterView && !p.clusterView:
		return notSupported(c.name, c.reason)
	case cmd == cmdConfigSet:
		if reply := p.refuseConfigSet(); reply != "" {
			return reply
		}
		reply, slow := p.checkSlowlogSet()
		if reply != "" {
			return reply
		}
		_, tracking := p.trackingMaxKeys()
		p.withLocal = slow || tracking // the proxy's slowlog and table follow them (keyed)
	case cmd == cmdConfigGet:
		p.withLocal = p.getsSlowlog() // answered with the proxy's slowlog values
	case cmd == cmdDebugProtocol && p.proto != 0 && equalFold(p.arg(2), "push"):
		// The server sends a push frame, then the reply: on a connection
		// shared by many clients the push would be taken for the reply.
		return notSupported("debug|protocol|push", "a push frame on a shared server connection would be taken for a reply")
	}
	if c.calledClass() == classUnsupported {
		return notSupported(c.name, c.reason)
	}
	return ""
}

// keyed turns a request of class cls that a server answers into req:
// its keys (p.keyPos) checked against the pool's rules, its route, and
// what a blocking, pinned or subscribing request needs besides.
func (p *parser) keyed(frame []byte, req *codec.Request, cmd int, c *command, cls class) (int, error) {
	n := len(frame)
	if c.step == 2 && (p.argc()-1)%2 != 0 { // MSET, MSETNX: key-value pairs
		return 0, reject(wrongArity(c.name), n)
	}
	keys, blocked := c.keyPositions(p.keyPos[:0], p)
	p.keyPos = keys
	if p.keyTooLong() {
		return 0, reject(errorLine("key is longer than "+strconv.Itoa(p.maxKey)+" bytes"), n)
	}
	p.build(frame, req, cmd, c, 0)
	req.Route = routeOf(cls, len(keys))
	switch {
	case cls == classBlock:
		blockRoute(req, p.blockTimeout(c))
	case blocked: // XREAD BLOCK
		blockRoute(req, p.xreadBlock())
	case cls == classPin:
		req.Pin = c.pin
		if c.block != blockNone {
			req.Block = p.blockTimeout(c)
		}
	case cls == classSub:
		req.Sub = c.sub
	case p.scriptsOwn && isScript(cmd):
		blockRoute(req, 0) // as long as the script runs
		req.Script = codec.ScriptRun
	case cmd == cmdClientPause || cmd == cmdClientUnpause:
		p.pause(req, cmd)
	}
	req.WithLocal, p.withLocal = p.withLocal, false // no branch for the requests that are not
	return n, nil
}

// keyTooLong reports whether a key at p.keyPos is longer than the pool
// allows.
func (p *parser) keyTooLong() bool {
	if p.maxKey > 0 {
		for _, i := range p.keyPos {
			if len(p.arg(i)) > p.maxKey {
				return true
			}
		}
	}
	return false
}

// routeOf maps a class to the route of a request with nkeys keys.
func routeOf(cls class, nkeys int) codec.Route {
	switch cls {
	case classMulti:
		if nkeys == 1 {
			return codec.RouteKey
		}
		return codec.RouteMulti
	case classSame:
		return codec.RouteSame
	case classAny:
		return codec.RouteAny
	case classAll:
		return codec.RouteAll
	case classPin:
		return codec.RoutePin
	case classSub:
		return codec.RouteSubscribe
	}
	return codec.RouteKey
}

// resolve finds the command (or subcommand) the arguments name. reply is
// redis-server's error for an unknown command or subcommand or a wrong
// number of arguments.
func (p *parser) resolve() (cmd int, c *command, reply string) {
	name := p.arg(0)
	if len(name) > len(p.lower)/2 {
		return 0, nil, unknownCommand(p)
	}
	lowered := p.lower[:len(name)]
	h := nameHash
	bar := false
	for i, b := range name {
		lowered[i] = lower(b)
		h = hashByte(h, lowered[i])
		bar = bar || b == '|' // "client|id" names no command
	}
	if cmd = lookupHashed(lowered, h); cmd == 0 || bar {
		return 0, nil, unknownCommand(p)
	}
	c = commandOf(cmd)
	if c.class == classContainer && p.argc() > 1 {
		sub := p.arg(1)
		if len(sub) >= len(p.lower)/2 {
			return 0, nil, unknownSubcommand(p)
		}
		full := p.lower[:len(name)+1+len(sub)]
		full[len(name)] = '|'
		h = hashByte(h, '|')
		for i, b := range sub {
			full[len(name)+1+i] = lower(b)
			h = hashByte(h, full[len(name)+1+i])
		}
		if cmd = lookupHashed(full, h); cmd == 0 {
			return 0, nil, unknownSubcommand(p)
		}
		c = commandOf(cmd)
	}
	if !c.argCountOK(p.argc()) {
		return 0, nil, wrongArity(c.name)
	}
	return cmd, c, ""
}

// containerOf returns the Cmd of the container of subcommand cmd, or 0.
func containerOf(cmd int) int {
	name := commandOf(cmd).name
	for i := range len(name) {
		if name[i] == '|' {
			return lookup(name[:i])
		}
	}
	return 0
}

// build fills req from the request: its wire (the frame as the client sent
// it when that is a well-formed multibulk frame, else re-encoded as one),
// its keys at p.keyPos, and extra bytes of room after the wire.
func (p *parser) build(frame []byte, req *codec.Request, cmd int, c *command, extra int) []byte {
	b := req.Buf[:0]
	if p.canonical {
		if cap(b) < len(frame)+extra {
			b = make([]byte, 0, len(frame)+extra)
		}
		b = append(b, frame...)
	} else {
		size := p.encodedSize() + extra
		if cap(b) < size {
			b = make([]byte, 0, size)
		}
		b = redcon.AppendArray(b, p.argc())
		for i := range p.args {
			arg := p.arg(i)
			b = redcon.AppendBulk(b, arg)
			p.args[i] = span{len(b) - 2 - len(arg), len(b) - 2}
		}
		p.src = b
	}
	req.Buf = b
	req.Wire = b[:len(b):len(b)]
	req.Name = c.name
	req.Cmd = cmd
	req.Mode = codec.ModeNormal
	req.Close = false
	req.Arg = 0
	req.Script = codec.ScriptNone
	req.Pause = codec.PauseNone
	req.TxOne = c.txOne
	req.Keys = req.Keys[:0]
	for _, i := range p.keyPos {
		s := p.args[i]
		req.Keys = append(req.Keys, b[s.start:s.end:s.end])
	}
	return b
}

// encodedSize is the length of the arguments encoded as a multibulk frame.
func (p *parser) encodedSize() int {
	n := 1 + digits(len(p.args)) + 2
	for _, s := range p.args {
		l := s.end - s.start
		n += 1 + digits(l) + 2 + l + 2
	}
	return n
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}
