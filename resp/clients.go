package resp

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// CLIENT LIST, CLIENT INFO and CLIENT KILL answer from the pool's client
// connections (codec.ClientsEnv): the proxy's own clients, which a
// server behind it never sees. Their arguments are checked while parsing,
// in the client's order, with redis-server's errors; AppendLocal reads them
// again from the request's wire and lists or ends the connections.

// identity is what a parser's client set that another session's CLIENT
// LIST shows: published whole (parser.publish) when it changes, so that
// any goroutine may read it.
type identity struct {
	name  string
	proto uint8
}

// publish makes the parser's name and protocol what CLIENT LIST shows.
func (p *parser) publish() {
	if id := p.shared.Load(); id == nil || id.name != string(p.name) || id.proto != p.proto {
		p.shared.Store(&identity{name: string(p.name), proto: p.proto})
	}
}

// clientFilter is the filters of a CLIENT LIST or CLIENT KILL.
type clientFilter struct {
	ids         []int64
	typ         string // "" for any, or normal, pubsub, master, replica
	addr, laddr string
	user        string
	keepSelf    bool // KILL's SKIPME yes, its default; LIST lists the asking client
	legacy      bool // CLIENT KILL addr:port
}

// Redis's words for CLIENT's errors.
const (
	replyNoSuchClient = "-ERR No such client\r\n"
	replyBadClientID  = "-ERR Invalid client ID\r\n"
	replyKillID       = "-ERR client-id should be greater than 0\r\n"
)

// clientArgs returns the arguments of the request being parsed, from the
// third on (after CLIENT and the subcommand).
func (p *parser) clientArgs() [][]byte {
	args := make([][]byte, 0, p.argc()-2)
	for i := 2; i < p.argc(); i++ {
		args = append(args, p.arg(i))
	}
	return args
}

// wireArgv returns every argument of a request's wire, a multibulk, its
// name first.
func wireArgv(wire []byte) [][]byte {
	var args [][]byte
	_, v := redcon.ReadNextRESP(wire)
	v.ForEach(func(a redcon.RESP) bool {
		args = append(args, a.Data)
		return true
	})
	return args
}

// wireArgs returns the arguments of a request's wire from the third on.
func wireArgs(wire []byte) [][]byte {
	args := wireArgv(wire)
	if len(args) < 2 {
		return nil
	}
	return args[2:]
}

// parseClientFilter reads the filters of CLIENT LIST (kill false) or
// CLIENT KILL, or returns the error redis-server answers them with.
func (p *parser) parseClientFilter(args [][]byte, kill bool) (clientFilter, string) {
	f := clientFilter{keepSelf: kill}
	if kill && len(args) == 1 {
		f.legacy, f.addr = true, string(args[0])
		return f, ""
	}
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return f, replySyntax
		}
		opt, val := strings.ToLower(string(args[i])), string(args[i+1])
		switch {
		case opt == "type":
			if f.typ = strings.ToLower(val); !validClientType(f.typ) {
				return f, "-ERR Unknown client type '" + val + "'\r\n"
			}
		case opt == "id" && !kill:
			return p.listIDs(f, args[i+1:])
		case opt == "id":
			id, err := strconv.ParseInt(val, 10, 64)
			if err != nil || id <= 0 {
				return f, replyKillID
			}
			f.ids = append(f.ids, id)
		case opt == "addr" && kill:
			f.addr = val
		case opt == "laddr" && kill:
			f.laddr = val
		case opt == "user" && kill:
			if val != p.userName() {
				return f, "-ERR No such user '" + val + "'\r\n"
			}
			f.user = val
		case opt == "skipme" && kill && (strings.EqualFold(val, "yes") || strings.EqualFold(val, "no")):
			f.keepSelf = strings.EqualFold(val, "yes")
		default:
			return f, replySyntax
		}
	}
	return f, ""
}

// listIDs reads CLIENT LIST's ID filter, which takes the rest of the
// arguments.
func (p *parser) listIDs(f clientFilter, ids [][]byte) (clientFilter, string) {
	for _, b := range ids {
		id, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || id <= 0 {
			return f, replyBadClientID
		}
		f.ids = append(f.ids, id)
	}
	return f, ""
}

func validClientType(t string) bool {
	return t == "normal" || t == "pubsub" || t == "master" || t == "replica" || t == "slave"
}

// userName is the user the pool's clients authenticate as.
func (p *parser) userName() string {
	if p.username == "" {
		return "default"
	}
	return p.username
}

// checkClient checks a CLIENT LIST, KILL or NO-EVICT while parsing.
func (p *parser) checkClient(local localCmd) string {
	switch local {
	case localClientList, localClientKill:
		_, errReply := p.parseClientFilter(p.clientArgs(), local == localClientKill)
		return errReply
	case localClientNoEvict:
		if v := p.arg(2); !strings.EqualFold(string(v), "on") && !strings.EqualFold(string(v), "off") {
			return replySyntax
		}
	}
	return ""
}

// match reports whether c passes f.
func (f *clientFilter) match(c *codec.Client, id int64, user string) bool {
	switch {
	case len(f.ids) > 0 && !slices.Contains(f.ids, id),
		f.typ != "" && f.typ != clientType(c),
		f.addr != "" && f.addr != c.Addr,
		f.laddr != "" && f.laddr != c.LAddr,
		f.user != "" && f.user != user,
		f.keepSelf && c.Self && !f.legacy:
		return false
	}
	return true
}

// clientType is CLIENT LIST's TYPE of c: the proxy's clients are never
// replicas or masters.
func clientType(c *codec.Client) string {
	if c.Subscribed {
		return "pubsub"
	}
	return "normal"
}

// appendClients answers CLIENT LIST, INFO or KILL from env's clients.
func appendClients(dst []byte, req *codec.Request, local localCmd, env codec.Env) []byte {
	ce, ok := env.(codec.ClientsEnv)
	if !ok {
		return redcon.AppendError(dst, "ERR no client list here")
	}
	clients := ce.Clients()
	var self *parser
	for i := range clients {
		if clients[i].Self {
			self, _ = clients[i].Parser.(*parser)
		}
	}
	if self == nil {
		return redcon.AppendError(dst, "ERR the asking client is not listed")
	}
	args := argvLen(req.Wire)
	if local == localClientInfo {
		for i := range clients {
			if clients[i].Self {
				return appendText(dst, req.Proto, appendClientLine(nil, &clients[i], self.userName(), args))
			}
		}
	}
	f, _ := self.parseClientFilter(wireArgs(req.Wire), local == localClientKill)
	var text []byte
	killed := 0
	for i := range clients {
		c := &clients[i]
		cp, ok := c.Parser.(*parser)
		if !ok || !f.match(c, cp.id, cp.userName()) {
			continue
		}
		if local == localClientList {
			n := 0
			if c.Self {
				n = args
			}
			text = appendClientLine(text, c, cp.userName(), n)
			continue
		}
		c.Kill()
		killed++
	}
	switch {
	case local == localClientList:
		return appendText(dst, req.Proto, text)
	case !f.legacy:
		return redcon.AppendInt(dst, int64(killed))
	case killed == 0:
		return append(dst, replyNoSuchClient...)
	}
	return redcon.AppendOK(dst)
}

// appendClientLine appends c's line of CLIENT LIST, in redis-server 7.0's
// fields, from what the proxy knows of its client (see docs/redis.md,
// Clients); args is the asking request's arguments' length, for the
// asking client's argv-mem. The fields of a server's reply buffers (rbs,
// rbp, obl, oll) are 0: the proxy keeps no buffer of replies per client.
func appendClientLine(b []byte, c *codec.Client, user string, args int) []byte {
	cp := c.Parser.(*parser)
	id := cp.shared.Load()
	if id == nil {
		id = &identity{}
	}
	multi := -1
	if c.Multi {
		multi = c.Queued
	}
	cmd := "NULL"
	if c := commandOf(c.Cmd); c != nil {
		cmd = c.name
	}
	redir := int64(-1)
	if c.Tracking {
		redir = c.Redirect
	}
	events := " events=r cmd="
	if c.OutWait {
		events = " events=rw cmd="
	}
	b = append(b, "id="...)
	b = strconv.AppendInt(b, cp.id, 10)
	b = append(b, " addr="+c.Addr+" laddr="+c.LAddr+" fd="...)
	b = strconv.AppendInt(b, int64(c.FD), 10)
	b = append(b, " name="+id.name+" age="...)
	b = strconv.AppendInt(b, int64(c.Age.Seconds()), 10)
	b = append(b, " idle="...)
	b = strconv.AppendInt(b, int64(c.Idle.Seconds()), 10)
	b = append(b, " flags="...)
	b = appendClientFlags(b, c)
	b = appendFields(b, []clientField{
		{" db=", int64(cp.db)}, {" sub=", int64(c.Subs[0])}, {" psub=", int64(c.Subs[1])},
		{" ssub=", int64(c.Subs[2])}, {" multi=", int64(multi)}, {" qbuf=", int64(c.InBuf)},
		{" qbuf-free=", int64(c.InFree)}, {" argv-mem=", int64(args)},
		{" multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=", c.OutHeld},
		{" tot-mem=", int64(c.InBuf+c.InFree+args) + c.OutHeld},
	})
	b = append(b, events+cmd+" user="+user+" redir="...)
	b = strconv.AppendInt(b, redir, 10)
	b = append(b, " resp="...)
	b = strconv.AppendInt(b, int64(max(id.proto, 2)), 10)
	return append(b, '\n')
}

// clientField is a numeric field of a CLIENT LIST line, with the text
// before its value.
type clientField struct {
	text  string
	value int64
}

func appendFields(b []byte, fs []clientField) []byte {
	for _, f := range fs {
		b = append(b, f.text...)
		b = strconv.AppendInt(b, f.value, 10)
	}
	return b
}

// appendClientFlags appends c's flags in redis-server's order: P
// subscribed, x inside MULTI, b blocked, t tracking, R its redirection
// broken, B tracking BCAST, U a unix socket's; N for none.
func appendClientFlags(b []byte, c *codec.Client) []byte {
	n := len(b)
	for _, f := range [...]struct {
		on   bool
		flag byte
	}{
		{c.Subscribed, 'P'}, {c.Multi, 'x'}, {c.Blocked, 'b'}, {c.Tracking, 't'},
		{c.Tracking && c.TrackBroken, 'R'}, {c.Tracking && c.TrackBcast, 'B'}, {c.Unix, 'U'},
	} {
		if f.on {
			b = append(b, f.flag)
		}
	}
	if len(b) == n {
		b = append(b, 'N')
	}
	return b
}

// argvLen is the length of a request's arguments, its name's included
// (redis-server's argv-mem of the client running it).
func argvLen(wire []byte) int {
	n := 0
	for _, a := range wireArgv(wire) {
		n += len(a)
	}
	return n
}
