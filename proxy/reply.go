package proxy

import (
	"shardproxy/codec"
	"shardproxy/resp"
)

// CLIENT REPLY ON|OFF|SKIP mutes the client's own connection to the
// proxy, never a server's: the servers' connections are shared, and a
// muted command still runs, its reply read from the server and dropped
// here. The session reader marks each CLIENT REPLY's pending with its
// mode (appendLocal); the writer applies the modes in the client's order
// as it writes (shows), as redis-server's flags do after each command, so
// what is read and routed before a mode reaches the writer is still
// judged by the modes before it. A writer that never saw a CLIENT REPLY
// pays one test per reply (writeBatch).
//
// What Redis 7.0 still sends a muted client gets through: pushes
// (messages, invalidations, tracking-redir-broken: queuePush's pendings)
// and the confirmations of subscribe commands, which Redis sends as
// pushes too.

// shows reports whether p's reply goes to the client, and moves the
// client's mode on past p. The holder of the right to write alone.
func (w *writer) shows(p *pending) bool {
	switch p.reply {
	case resp.ReplyOn:
		w.mute = 0
		return true
	case resp.ReplyOff:
		w.mute = resp.ReplyOff
		return false
	case resp.ReplySkip:
		if w.mute != resp.ReplyOff {
			w.mute = resp.ReplySkip // the next command's, not this one's
		}
		return false
	}
	if p.push {
		return true // not a command: a SKIP waits for the next
	}
	shown := w.mute == 0 || p.Req.Route == codec.RouteSubscribe
	if w.mute == resp.ReplySkip {
		w.mute = 0
	}
	return shown
}

// markReply notes on p, a command the proxy answers, the mode it asks for
// when it is a CLIENT REPLY. Reader only; local commands only.
func markReply(p *pending) {
	p.reply = resp.ClientReply(&p.Req)
}
