package resp

import "shardproxy/codec"

// ReplyMode is what a CLIENT REPLY asks of the replies to its client's
// later commands. The proxy mutes its own client (the session); no server
// hears of it, since the servers' connections are shared.
type ReplyMode uint8

const (
	// ReplyOn (CLIENT REPLY ON, answered +OK): every reply again.
	ReplyOn ReplyMode = iota + 1
	// ReplyOff (no answer): no reply to any later command, errors
	// included, until ReplyOn. Pushes still reach the client: pub/sub
	// messages and the subscribe commands' confirmations, invalidations.
	ReplyOff
	// ReplySkip (no answer): no reply to the next command; under
	// ReplyOff, nothing changes.
	ReplySkip
)

// ClientReply returns the mode req asks for when it is a CLIENT REPLY the
// parser accepted, else 0.
func ClientReply(req *codec.Request) ReplyMode {
	if req.Name != "client|reply" {
		return 0
	}
	args := wireArgs(req.Wire)
	if len(args) != 1 {
		return 0
	}
	return replyModeOf(args[0])
}

// replyModeOf reads CLIENT REPLY's argument, or returns 0.
func replyModeOf(arg []byte) ReplyMode {
	switch {
	case equalFold(arg, "on"):
		return ReplyOn
	case equalFold(arg, "off"):
		return ReplyOff
	case equalFold(arg, "skip"):
		return ReplySkip
	}
	return 0
}
