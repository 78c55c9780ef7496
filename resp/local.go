package resp

import (
	"crypto/subtle"
	"math"
	"strconv"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// This file answers the commands the proxy handles itself. Those that read
// or change the session's state (AUTH, HELLO, SELECT, RESET, CLIENT ...)
// are decided while parsing, in the client's order, and their reply is kept
// in req.Buf after the wire (req.Arg is its offset); HELLO's reply, which
// needs the proxy's version, and INFO's, which needs its counters, are
// made by AppendLocal.

// local decides a RouteLocal request. Its errors are rejections: the
// connection stays open.
func (p *parser) local(frame []byte, req *codec.Request, cmd int, c *command) (int, error) {
	n := len(frame)
	if c.local == localInfo && p.serverInfo && !p.onlyProxyInfo() {
		p.infoToServers(frame, req, cmd, c)
		return n, nil
	}
	out, errReply := p.localReply(c)
	p.reply = out
	if errReply != "" {
		return 0, reject(errReply, n)
	}
	p.keyPos = p.keyPos[:0]
	b := p.build(frame, req, cmd, c, len(out))
	req.Route = codec.RouteLocal
	req.Close = c.local == localQuit
	if c.local == localPing && p.scriptsOwn {
		req.Script = codec.ScriptPing
	}
	switch {
	case c.local == localHello:
		req.Arg = int(p.id)
	case c.local == localSlowlogGet:
		req.Arg = p.slowN
	case len(out) > 0:
		req.Arg = len(b)
		req.Buf = append(b, out...)
	}
	return n, nil
}

// infoToServers makes an INFO that asks for the servers' sections a
// request to every server, the proxy's section added to their replies.
func (p *parser) infoToServers(frame []byte, req *codec.Request, cmd int, c *command) {
	p.keyPos = p.keyPos[:0]
	p.build(frame, req, cmd, c, 0)
	req.Route = codec.RouteAll
	req.WithLocal = true
	req.ClusterView = p.clusterView
	if p.wantsProxyInfo() {
		req.Arg = infoProxyWanted
	}
}

// localReply answers a local command that leaves the session as it is, in
// p.reply's bytes, or returns the error reply that refuses it; the others
// go to sessionReply. HELLO and INFO answer nothing here: AppendLocal
// makes their replies.
func (p *parser) localReply(c *command) (out []byte, errReply string) {
	out = p.reply[:0]
	switch c.local {
	case localPing:
		switch p.argc() {
		case 1:
			return append(out, "+PONG\r\n"...), ""
		case 2:
			return redcon.AppendBulk(out, p.arg(1)), ""
		}
		return out, wrongArity(c.name)
	case localEcho:
		return redcon.AppendBulk(out, p.arg(1)), ""
	case localQuit:
		return redcon.AppendOK(out), ""
	case localClientGetname:
		if len(p.name) == 0 {
			return appendNull(out, p.proto), ""
		}
		return redcon.AppendBulk(out, p.name), ""
	case localClientID:
		return redcon.AppendInt(out, p.id), ""
	case localClientSetinfo:
		return appendOKUnless(out, clientSetinfo(p.arg(2), p.arg(3)))
	case localClientNoEvict: // the proxy evicts no client
		return appendOKUnless(out, p.checkClient(c.local))
	case localClientList, localClientKill, localClientInfo: // AppendLocal answers
		return out, p.checkClient(c.local)
	case localClientTracking: // the session answers (Tracking.Do)
		return out, ""
	case localClientReply: // ON's OK; OFF and SKIP answer nothing
		switch replyModeOf(p.arg(2)) {
		case ReplyOn:
			return redcon.AppendOK(out), ""
		case ReplyOff, ReplySkip:
			return out, ""
		}
		return out, replySyntax
	case localClusterOK, localClusterSlots, localClusterShards, localClusterNodes, localClusterInfo,
		localClusterMyID, localClusterKeyslot:
		return p.clusterReply(out, c.local), ""
	case localSlowlogGet:
		return out, p.slowlogCount()
	case localSlowlogLen, localSlowlogReset:
		return out, "" // AppendLocal asks the pool
	}
	out, errReply = p.sessionReply(out, c.local)
	p.publish()
	return out, errReply
}

// sessionReply runs a local command that changes the session's state
// (SELECT checks it only), saving the state first (UndoState).
func (p *parser) sessionReply(out []byte, local localCmd) ([]byte, string) {
	switch local {
	case localSelect:
		return appendOKUnless(out, p.selectDB())
	case localAuth:
		p.save()
		return appendOKUnless(out, p.auth())
	case localHello:
		p.save()
		return out, p.hello()
	case localReset:
		p.save()
		p.authed = p.password == ""
		p.name = p.name[:0]
		p.proto = 0 // RESET goes back to RESP2, as in Redis
		return append(out, "+RESET\r\n"...), ""
	case localClientSetname:
		p.save()
		if !validName(p.arg(2)) {
			return out, replyBadClientName
		}
		p.name = append(p.name[:0], p.arg(2)...)
		return redcon.AppendOK(out), ""
	}
	return out, ""
}

// appendOKUnless appends "+OK" unless errReply refuses the command.
func appendOKUnless(out []byte, errReply string) ([]byte, string) {
	if errReply == "" {
		out = redcon.AppendOK(out)
	}
	return out, errReply
}

// selectDB checks SELECT's database against the pool's.
func (p *parser) selectDB() string {
	id, ok := parseInt(p.arg(1))
	switch {
	case !ok:
		return replyNotInteger
	case id < math.MinInt32 || id > math.MaxInt32:
		return replyIntRange
	case id < 0:
		return replyDBRange
	case id != int64(p.db):
		return errorLine("SELECT " + strconv.FormatInt(id, 10) +
			" is not supported by shardproxy: this pool serves db " + strconv.Itoa(p.db) + " only")
	}
	return ""
}

// auth runs AUTH [username] password. A failed AUTH leaves the session as
// it was, as in Redis.
func (p *parser) auth() string {
	switch {
	case p.password == "":
		return replyNoPassword
	case p.argc() > 3:
		return replySyntax
	}
	user, pass := []byte("default"), p.arg(1)
	if p.argc() == 3 {
		user, pass = p.arg(1), p.arg(2)
	}
	if !p.credentialsOK(user, pass) {
		return replyWrongPass
	}
	p.authed = true
	return ""
}

// credentialsOK compares a username and password with the pool's in
// constant time. Without a configured password only the default user
// exists and it needs none, as in Redis.
func (p *parser) credentialsOK(user, pass []byte) bool {
	want := p.username
	if want == "" {
		want = "default"
	}
	if p.password == "" {
		return string(user) == "default"
	}
	userOK := subtle.ConstantTimeCompare(user, []byte(want))
	passOK := subtle.ConstantTimeCompare(pass, []byte(p.password))
	return userOK&passOK == 1
}

// hello runs HELLO [protover [AUTH username password] [SETNAME name]] as
// Redis 7.0 does: protover 2 or 3 switches the session to that protocol
// once every option is accepted (a refused HELLO changes nothing), and
// later requests carry it (codec.Request.Proto).
func (p *parser) hello() string {
	next, proto := 1, p.proto
	if p.argc() >= 2 {
		next = 2
		ver, ok := parseInt(p.arg(1))
		switch {
		case !ok:
			return replyProtoVersion
		case ver == 3 && !p.resp2Only:
			proto = proto3
		case ver == 2:
			proto = 0
		default:
			return replyNoProto
		}
	}
	for j := next; j < p.argc(); j++ {
		more := p.argc() - 1 - j
		opt := p.arg(j)
		switch {
		case equalFold(opt, "auth") && more >= 2:
			if !p.credentialsOK(p.arg(j+1), p.arg(j+2)) {
				return replyWrongPass
			}
			p.authed = true
			j += 2
		case equalFold(opt, "setname") && more >= 1:
			if !validName(p.arg(j + 1)) {
				return replyBadClientName
			}
			p.name = append(p.name[:0], p.arg(j+1)...)
			j++
		default:
			return errorLine("Syntax error in HELLO option '" + cString(opt, maxQuoted) + "'")
		}
	}
	if !p.authed {
		return replyHelloNoAuth
	}
	p.proto = proto
	return ""
}

// validName reports whether a client name (or library name) has only the
// printable ASCII characters Redis allows; empty clears the name.
func validName(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// clientSetinfo checks CLIENT SETINFO LIB-NAME|LIB-VER value as Redis 7.2
// does. The proxy keeps nothing: its backends are shared.
func clientSetinfo(attr, value []byte) string {
	if !equalFold(attr, "lib-name") && !equalFold(attr, "lib-ver") {
		return errorLine("Unrecognized option '" + cString(attr, maxQuoted) + "'")
	}
	if !validName(value) {
		return errorLine(cString(attr, maxQuoted) + " cannot contain spaces, newlines or special characters.")
	}
	return ""
}

// AppendLocal implements codec.Dialect for RouteLocal requests: the reply
// the parser decided on; for HELLO the map (in RESP2 a flat array) with
// server "shardproxy", env's version, the protocol the client now speaks
// and its id; for INFO a bulk string (in RESP3 a verbatim string of
// format "txt", as Redis answers) with one "# Proxy" section of env's
// counters.
func (*Dialect) AppendLocal(dst []byte, req *codec.Request, env codec.Env) []byte {
	c := commandOf(req.Cmd)
	switch {
	case c == nil:
	case c.local == localHello:
		return appendHello(dst, req.Arg, req.Proto, env)
	case c.local == localInfo:
		return appendInfo(dst, req.Proto, env)
	case c.local == localClientList || c.local == localClientInfo || c.local == localClientKill:
		return appendClients(dst, req, c.local, env)
	case c.local >= localClusterSlots && c.local <= localClusterKeyslot:
		return appendCluster(dst, req, c.local, env)
	case c.local == localSlowlogGet || c.local == localSlowlogLen || c.local == localSlowlogReset:
		return appendSlowlog(dst, c.local, req.Arg, env)
	case c.local == localClientReply && req.Arg == 0: // OFF, SKIP
		return dst
	case req.Arg > 0 && req.Arg < len(req.Buf):
		return append(dst, req.Buf[req.Arg:]...)
	}
	return redcon.AppendError(dst, "ERR no local answer for "+req.Name)
}

func appendHello(dst []byte, id int, proto uint8, env codec.Env) []byte {
	version := "unknown"
	if env != nil {
		version = env.Version()
	}
	dst = appendFieldsHeader(dst, 7, proto)
	dst = redcon.AppendBulkString(dst, "server")
	dst = redcon.AppendBulkString(dst, "shardproxy")
	dst = redcon.AppendBulkString(dst, "version")
	dst = redcon.AppendBulkString(dst, version)
	dst = redcon.AppendBulkString(dst, "proto")
	dst = redcon.AppendInt(dst, int64(max(proto, 2)))
	dst = redcon.AppendBulkString(dst, "id")
	dst = redcon.AppendInt(dst, int64(id))
	dst = redcon.AppendBulkString(dst, "mode")
	dst = redcon.AppendBulkString(dst, "standalone")
	dst = redcon.AppendBulkString(dst, "role")
	dst = redcon.AppendBulkString(dst, "master")
	dst = redcon.AppendBulkString(dst, "modules")
	return redcon.AppendArray(dst, 0)
}

// appendInfo writes "# Proxy\r\n" and the proxy's lines (appendProxyLines)
// as one bulk string (appendText).
func appendInfo(dst []byte, proto uint8, env codec.Env) []byte {
	return appendText(dst, proto, appendProxyLines([]byte("# Proxy\r\n"), env))
}

// appendProxyLines writes a "name:value\r\n" line per counter (env's
// Stats, then its "proxy" section when it has one). Line breaks in names
// and values become spaces, and ':' in names '_', so every line stays one
// field.
func appendProxyLines(body []byte, env codec.Env) []byte {
	if env == nil {
		return body
	}
	stats := env.Stats()
	if se, ok := env.(codec.SectionEnv); ok {
		if more, ok := se.Section("proxy"); ok {
			stats = append(stats[:len(stats):len(stats)], more...)
		}
	}
	for _, s := range stats {
		body = appendField(body, s.Name, true)
		body = append(body, ':')
		body = appendField(body, s.Value, false)
		body = append(body, "\r\n"...)
	}
	return body
}

func appendField(dst []byte, s string, name bool) []byte {
	for i := range len(s) {
		c := s[i]
		switch {
		case c == '\r' || c == '\n':
			c = ' '
		case name && (c == ':' || c == ' '):
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}
