package memcache

import (
	"bytes"

	"shardproxy/codec"
)

// AppendReply implements codec.Dialect: a noreply request shows nothing, a
// quiet meta request shows its reply without the "MN\r\n" the parser asked
// for (or, sent in memcached proxy's form, shows what memcached's proxy
// shows of it: see quietHides), a get sent as mg shows the text reply, any
// other request shows the reply as the backend sent it.
func (*Dialect) AppendReply(dst []byte, req *codec.Request, reply []byte, _ codec.ReplyKind) []byte {
	switch req.Mode {
	case codec.ModeNoreply:
		return dst
	case codec.ModeQuiet:
		if req.Arg > 0 && quietHides(req.Cmd, reply) {
			return dst
		}
		reply = bytes.TrimSuffix(reply, []byte("MN\r\n"))
	case codec.ModeRewrite:
		return appendMetaGet(dst, req, reply)
	}
	return append(dst, reply...)
}

// AppendError implements codec.Dialect: "CLIENT_ERROR <msg>\r\n",
// "SERVER_ERROR <msg>\r\n" or "ERROR\r\n". Line breaks in msg become
// spaces so the reply stays one line.
func (*Dialect) AppendError(dst []byte, kind codec.ErrorKind, msg string) []byte {
	switch kind {
	case codec.ErrClient, codec.ErrCrossServer:
		dst = append(dst, "CLIENT_ERROR "...)
	case codec.ErrServer:
		dst = append(dst, "SERVER_ERROR "...)
	default:
		return append(dst, replyError...)
	}
	return appendLine(dst, msg)
}

// appendLine appends s with '\r' and '\n' replaced by spaces, then "\r\n".
func appendLine(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return append(dst, "\r\n"...)
}

// AppendLocal implements codec.Dialect for the requests the parser routes
// RouteLocal (and RouteWatch): version ("VERSION <env.Version()>"),
// verbosity and watch ("OK"), stats
// (every env.Stats() counter as "STAT <name> <value>", then "END"; "stats
// <section>" shows the section's counters when env is a codec.SectionEnv
// that has it, else the general ones), mn ("MN"), gat and
// gats without keys ("END", as memcached) and quit (nothing). A noreply
// request shows nothing.
func (*Dialect) AppendLocal(dst []byte, req *codec.Request, env codec.Env) []byte {
	if req.Mode == codec.ModeNoreply {
		return dst
	}
	switch req.Cmd {
	case CmdVersion:
		v := "unknown"
		if env != nil {
			v = env.Version()
		}
		return appendLine(append(dst, "VERSION "...), v)
	case CmdVerbosity, CmdWatch:
		return append(dst, "OK\r\n"...)
	case CmdStats:
		if env != nil {
			stats := env.Stats()
			if arg := statsArg(req.Wire); arg != "" {
				if se, ok := env.(codec.SectionEnv); ok {
					if sec, ok := se.Section(arg); ok {
						stats = sec
					}
				}
			}
			for _, s := range stats {
				dst = append(dst, "STAT "...)
				dst = appendToken(dst, s.Name)
				dst = append(dst, ' ')
				dst = appendLine(dst, s.Value)
			}
		}
		return append(dst, "END\r\n"...)
	case CmdMetaNoop:
		return append(dst, "MN\r\n"...)
	case CmdGat, CmdGats:
		return append(dst, "END\r\n"...)
	case CmdQuit:
		return dst
	}
	return appendLine(append(dst, "SERVER_ERROR no local answer for "...), req.Name)
}

// statsArg returns the first argument of a "stats" request line, or "".
func statsArg(wire []byte) string {
	line, _, _ := bytes.Cut(wire, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 2 {
		return ""
	}
	return string(f[1])
}

// appendToken appends s with spaces and line breaks replaced by '_', so a
// stat name stays one token.
func appendToken(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '\r' || c == '\n' {
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}

// quietHides reports whether memcached's proxy hides a backend's reply to
// a quiet meta request of cmd (observed on memcached 1.6.45, which agrees
// with what memcached itself hides in quiet mode): a miss (EN) always,
// success (HD, or VA, which ma gives with v) for every command but mg;
// NF, NS, EX and errors are shown.
func quietHides(cmd int, reply []byte) bool {
	if len(reply) < 4 || reply[2] != ' ' && reply[2] != '\r' {
		return false
	}
	switch string(reply[:2]) {
	case "EN":
		return true
	case "HD", "VA":
		return cmd != CmdMetaGet
	}
	return false
}
