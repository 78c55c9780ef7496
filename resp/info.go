package resp

import (
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// INFO on a pool whose kind sets codec.Options.ServerInfo goes to every
// server (RouteAll) and its replies are merged here into one reply with
// the sections a single redis-server would give: the same "# Name"
// headers, "name:value" lines, "\r\n" line ends and one empty line
// between sections. The proxy's "# Proxy" section comes last; the
// session adds its lines to the request before it is routed (AddLocal),
// so that they count the requests before it, as a local answer does.
// infomerge.go holds the rules that say how each field is merged.

// cmdINFO is INFO's Cmd number.
var cmdINFO = lookup("info")

// infoProxyWanted is an INFO request's Arg from the parser until AddLocal
// replaces it with the offset of the proxy's lines in Buf: the client
// asked for the Proxy section (INFO, INFO default|all|everything|proxy).
const infoProxyWanted = -1

// onlyProxyInfo reports whether every section INFO names is "proxy": the
// proxy answers that alone, without asking its servers.
func (p *parser) onlyProxyInfo() bool {
	if p.argc() < 2 {
		return false
	}
	for i := 1; i < p.argc(); i++ {
		if !equalFold(p.arg(i), "proxy") {
			return false
		}
	}
	return true
}

// wantsProxyInfo reports whether INFO's arguments include the Proxy
// section: none (Redis's default sections), or default, all, everything
// or proxy among them.
func (p *parser) wantsProxyInfo() bool {
	if p.argc() < 2 {
		return true
	}
	for i := 1; i < p.argc(); i++ {
		a := p.arg(i)
		if equalFold(a, "default") || equalFold(a, "all") || equalFold(a, "everything") || equalFold(a, "proxy") {
			return true
		}
	}
	return false
}

var _ codec.LocalAdder = (*Dialect)(nil)

// AddLocal implements codec.LocalAdder: for an INFO bound for the servers
// that asks for the Proxy section, the section's lines go after the wire
// in req.Buf and req.Arg says where they start. Wire keeps pointing at
// the request's bytes even if Buf moves. A CONFIG SET or GET of the
// slowlog's parameters sets or reads the pool's (addSlowlogConfig).
func (*Dialect) AddLocal(req *codec.Request, env codec.Env) {
	if req.Cmd == cmdConfigSet || req.Cmd == cmdConfigGet {
		addSlowlogConfig(req, env)
		return
	}
	if req.Cmd != cmdINFO || req.Arg != infoProxyWanted {
		return
	}
	req.Arg = len(req.Buf)
	req.Buf = appendProxyLines(req.Buf, env)
}

// proxyLines returns the Proxy section's lines AddLocal stored in req, or
// nil.
func proxyLines(req *codec.Request) []byte {
	if req.Arg <= 0 || req.Arg > len(req.Buf) {
		return nil
	}
	return req.Buf[req.Arg:]
}

// infoReply is what one server gave to a merged INFO.
type infoReply struct {
	server   string
	sections []infoSection
}

// infoFailure is a server that gave no INFO reply.
type infoFailure struct {
	server, err string
}

// mergeInfo answers an INFO sent to every server: their sections merged
// (mergeSections), then the Proxy section: the proxy's lines when asked
// for, and whenever a server failed, how many were asked and which
// failed with what. When none answered, the first failure is the answer.
func mergeInfo(dst []byte, req *codec.Request, replies []codec.Reply) []byte {
	var got []infoReply
	var failed []infoFailure
	first := -1 // the first failure's reply
	for i, r := range replies {
		text, msg := infoText(r)
		if msg != "" {
			failed = append(failed, infoFailure{r.Server, msg})
			if first < 0 {
				first = i
			}
			continue
		}
		got = append(got, infoReply{server: r.Server, sections: parseInfo(text)})
	}
	if len(got) == 0 {
		if first < 0 {
			return (&Dialect{}).AppendError(dst, codec.ErrServer, "no server to ask for INFO")
		}
		if r := replies[first]; r.Err != nil {
			return (&Dialect{}).AppendError(dst, codec.ErrServer, r.Err.Error())
		}
		return append(dst, replies[first].Raw...)
	}
	merged := mergeSections(got)
	if req.ClusterView {
		setField(merged, "cluster", "cluster_enabled", "1")
	}
	lines := proxyLines(req)
	if lines != nil || len(failed) > 0 {
		proxy := infoSection{name: "Proxy", header: true, lines: parseLines(lines)}
		proxy.lines = appendFailures(proxy.lines, len(replies), failed)
		merged = append(merged, proxy)
	}
	return appendText(dst, req.Proto, appendSections(nil, merged))
}

// setField sets a field of the merged section named section (lower case)
// to value, where that section is in the reply.
func setField(secs []infoSection, section, key, value string) {
	for i := range secs {
		if strings.ToLower(secs[i].name) != section {
			continue
		}
		for j := range secs[i].lines {
			if secs[i].lines[j].key == key {
				secs[i].lines[j].value = value
			}
		}
	}
}

// infoText returns the text of an INFO reply, or why there is none.
func infoText(r codec.Reply) (text []byte, failure string) {
	if r.Err != nil {
		return nil, r.Err.Error()
	}
	if n, v := redcon.ReadNextRESP(r.Raw); n > 0 && v.Type == redcon.Error {
		return nil, string(v.Data)
	}
	text, null, ok := readString(r.Raw) // a bulk string, or RESP3's verbatim one
	switch {
	case !ok && nextValue(r.Raw) == 0:
		return nil, "unreadable reply"
	case !ok || null:
		return nil, "unexpected reply to INFO"
	}
	return text, ""
}

// appendFailures adds to the Proxy section's lines how many servers INFO
// asked and how many answered, and one line per failed server:
// "info_failed0:server=NAME,error=TEXT", in the style of Redis's
// "slave0:ip=...,port=..." lines.
func appendFailures(lines []infoLine, asked int, failed []infoFailure) []infoLine {
	lines = append(lines,
		infoLine{key: "info_servers", value: strconv.Itoa(asked), colon: true},
		infoLine{key: "info_servers_answered", value: strconv.Itoa(asked - len(failed)), colon: true})
	for i, f := range failed {
		v := "server=" + oneField(f.server) + ",error=" + oneField(f.err)
		lines = append(lines, infoLine{key: "info_failed" + strconv.Itoa(i), value: v, colon: true})
	}
	return lines
}

// oneField keeps s within one sub-field of an INFO line: no line breaks,
// no commas.
func oneField(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == ',' {
			return ' '
		}
		return r
	}, s)
}

// infoSection is one section of an INFO reply.
type infoSection struct {
	name   string // as its header gives it: "Server", "CPU"
	header bool   // false for lines before any header
	lines  []infoLine
}

// infoLine is one line of a section: "key:value", or a line with no colon
// (kept as key).
type infoLine struct {
	key, value string
	colon      bool
}

// parseInfo splits INFO's text into sections. A line that starts with '#'
// opens a section named by the rest of it; empty lines are dropped; any
// other line belongs to the open section (lines before the first header
// make a section without one). It takes any bytes: a line is a line.
func parseInfo(text []byte) []infoSection {
	var out []infoSection
	for len(text) > 0 {
		var line []byte
		line, text = cutLine(text)
		switch {
		case len(line) == 0:
		case line[0] == '#':
			out = append(out, infoSection{name: strings.TrimSpace(string(line[1:])), header: true})
		default:
			if len(out) == 0 {
				out = append(out, infoSection{})
			}
			s := &out[len(out)-1]
			s.lines = append(s.lines, lineOf(line))
		}
	}
	return out
}

// parseLines parses lines with no header (the proxy's own).
func parseLines(text []byte) []infoLine {
	var lines []infoLine
	for len(text) > 0 {
		var line []byte
		line, text = cutLine(text)
		if len(line) > 0 {
			lines = append(lines, lineOf(line))
		}
	}
	return lines
}

// cutLine returns text's first line, without "\r\n" or "\n", and the rest.
func cutLine(text []byte) (line, rest []byte) {
	i := 0
	for i < len(text) && text[i] != '\n' {
		i++
	}
	line, rest = text[:i], text[min(i+1, len(text)):]
	for len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest
}

func lineOf(line []byte) infoLine {
	s := string(line)
	if k, v, ok := strings.Cut(s, ":"); ok {
		return infoLine{key: k, value: v, colon: true}
	}
	return infoLine{key: s}
}

// appendSections writes sections as redis-server does: each header line,
// then its lines, "\r\n" after each line and an empty line between
// sections.
func appendSections(dst []byte, sections []infoSection) []byte {
	for i, s := range sections {
		if i > 0 {
			dst = append(dst, "\r\n"...)
		}
		if s.header {
			dst = append(dst, "# "...)
			dst = append(dst, s.name...)
			dst = append(dst, "\r\n"...)
		}
		for _, l := range s.lines {
			dst = append(dst, l.key...)
			if l.colon {
				dst = append(dst, ':')
				dst = append(dst, l.value...)
			}
			dst = append(dst, "\r\n"...)
		}
	}
	return dst
}
