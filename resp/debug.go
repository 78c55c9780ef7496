package resp

import (
	"encoding/hex"
	"strings"

	"shardproxy/codec"
)

// This file merges the replies of DEBUG's subcommands for every server
// and of the persistence commands (SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE),
// which every server of a pool does for itself. Most answer what every
// server answered alike (mergeSame); these differ:
//
//   - DEBUG DIGEST: the servers' digests XORed. The servers' keys are
//     disjoint, each server's digest is stable while its data is, and an
//     empty server's is 40 zeros, so the pool's is stable while its data
//     is, and 40 zeros when every server is empty, as one server's.
//   - LASTSAVE: the oldest of the servers' times. A client waits for a
//     BGSAVE by polling LASTSAVE until it changes: with the oldest, it
//     changes only once every server has saved.
//
// A failure to answer names its server, as CONFIG SET's does: the other
// servers did what they were asked.

// Cmd numbers the merges of this file need.
var (
	cmdDebugDigest   = lookup("debug|digest")
	cmdDebugProtocol = lookup("debug|protocol")
	cmdLastsave      = lookup("lastsave")
)

// persistCmds are the persistence commands sent to every server.
var persistCmds = [...]int{lookup("save"), lookup("bgsave"), lookup("bgrewriteaof"), cmdLastsave}

// namesServer reports whether a failed reply to c names its server: a
// command that changes or reads every server's settings or state, which
// the servers that answered have applied.
func namesServer(c *command) bool {
	if c.serverConfig || c.txOne {
		return true
	}
	for _, cmd := range persistCmds {
		if commandOf(cmd) == c {
			return true
		}
	}
	return false
}

// digestLen is a DEBUG DIGEST's length: a SHA-1 in hex.
const digestLen = 40

// mergeDigest answers DEBUG DIGEST: the XOR of the servers' digests, as
// a status reply ("+<40 hex digits>"); false when a reply is no digest.
func mergeDigest(dst []byte, replies []codec.Reply) ([]byte, bool) {
	var sum, one [digestLen / 2]byte
	for _, r := range replies {
		line, ok := statusLine(r.Raw)
		if !ok || len(line) != digestLen {
			return dst, false
		}
		if _, err := hex.Decode(one[:], line); err != nil {
			return dst, false
		}
		for i := range sum {
			sum[i] ^= one[i]
		}
	}
	dst = append(dst, '+')
	dst = hex.AppendEncode(dst, sum[:])
	return append(dst, '\r', '\n'), true
}

// statusLine returns the text of a whole simple string reply.
func statusLine(raw []byte) ([]byte, bool) {
	if len(raw) == 0 || raw[0] != '+' {
		return nil, false
	}
	line, next, err := replyLine(raw, 0)
	return line, err == nil && next == len(raw)
}

// mergeOldest answers LASTSAVE: the smallest of the integer replies.
func mergeOldest(dst []byte, replies []codec.Reply) ([]byte, bool) {
	return mergeInts(dst, replies, func(oldest, n int64) int64 { return min(oldest, n) })
}

// disagreement words the error for replies to req that should agree and
// do not, naming the first server whose reply differs from the first's.
func (d *Dialect) disagreement(dst []byte, req *codec.Request, c *command, replies []codec.Reply) []byte {
	msg := "the servers' replies to " + displayName(req.Name) + " disagree or are not what it answers"
	if namesServer(c) {
		for _, r := range replies[1:] {
			if string(r.Raw) != string(replies[0].Raw) && r.Server != "" {
				msg += ": server " + r.Server + " answered " + quoteReply(r.Raw) +
					", server " + replies[0].Server + " " + quoteReply(replies[0].Raw)
				break
			}
		}
	}
	return d.AppendError(dst, codec.ErrServer, msg)
}

// quoteReply shows a reply's first line in an error, without its line
// end and at most 64 bytes of it.
func quoteReply(raw []byte) string {
	line, _, _ := strings.Cut(string(raw), "\r\n")
	if len(line) > 64 {
		line = line[:64] + "..."
	}
	return "'" + line + "'"
}
