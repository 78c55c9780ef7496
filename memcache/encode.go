package memcache

import (
	"bytes"

	"shardproxy/codec"
)

// AppendReply implements codec.Dialect: a noreply request shows nothing, a
// quiet meta request shows its reply without the "MN\r\n" the parser asked
// for (or, sent in memcached proxy's form, shows what memcached's proxy
// shows of it: see quietHides), a get sent as mg shows the text reply, the
// delete that stands for a too-large storage request shows memcached's
// error for it (see invalidate), any other request shows the reply as the
// backend sent it.
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
		if invalidates(req) {
			return append(dst, replyTooLarge...)
		}
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
// RouteLocal (and RouteWatch): version ("VERSION <v>", v the servers'
// version when env is a codec.VersionEnv, else env.Version()), verbosity
// and watch ("OK"), stats (see appendStats), mn ("MN"), gat and gats
// without keys ("END", as memcached) and quit (nothing). A noreply request
// shows nothing.
func (*Dialect) AppendLocal(dst []byte, req *codec.Request, env codec.Env) []byte {
	if req.Mode == codec.ModeNoreply {
		return dst
	}
	switch req.Cmd {
	case CmdVersion:
		v := "unknown"
		if ve, ok := env.(codec.VersionEnv); ok {
			v = ve.ServerVersion()
		} else if env != nil {
			v = env.Version()
		}
		return appendLine(append(dst, "VERSION "...), v)
	case CmdVerbosity, CmdWatch:
		return append(dst, "OK\r\n"...)
	case CmdStats:
		return appendStats(dst, req, env)
	case CmdMetaNoop:
		return append(dst, "MN\r\n"...)
	case CmdGet, CmdGets, CmdGat, CmdGats: // "gat 10", a part of no keys
		return append(dst, "END\r\n"...)
	case CmdQuit:
		return dst
	}
	return appendLine(append(dst, "SERVER_ERROR no local answer for "...), req.Name)
}

// appendStats answers "stats [<name> ...]" as memcached answers its
// subcommands (observed on memcached 1.6.18): no name gives every
// env.Stats() counter as "STAT <name> <value>", then "END"; "reset" resets
// the counters of a codec.ResetEnv and answers "RESET"; a name that a
// codec.SectionEnv has a section for ("proxy", "settings") gives that
// section's counters; any other name is "ERROR", as memcached answers a
// subcommand it does not know. Words after the name are ignored, as
// memcached ignores them.
func appendStats(dst []byte, req *codec.Request, env codec.Env) []byte {
	if env == nil {
		return append(dst, "END\r\n"...)
	}
	var stats []codec.Stat
	switch arg := statsArg(req.Wire); arg {
	case "":
		stats = env.Stats()
	case "reset":
		r, ok := env.(codec.ResetEnv)
		if !ok {
			return append(dst, replyError...)
		}
		r.ResetStats()
		return append(dst, "RESET\r\n"...)
	default:
		se, ok := env.(codec.SectionEnv)
		if !ok {
			return append(dst, replyError...)
		}
		if stats, ok = se.Section(arg); !ok {
			return append(dst, replyError...)
		}
	}
	for _, s := range stats {
		dst = append(dst, "STAT "...)
		dst = appendToken(dst, s.Name)
		dst = append(dst, ' ')
		dst = appendLine(dst, s.Value)
	}
	return append(dst, "END\r\n"...)
}

// statsArg returns the first argument of a "stats" request line, or "".
// Tokens are separated by spaces only, as memcached separates them.
func statsArg(wire []byte) string {
	line, _, _ := bytes.Cut(wire, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	for i, tok := range bytes.Split(line, []byte(" ")) {
		if len(tok) > 0 && i > 0 {
			return string(tok)
		}
	}
	return ""
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
