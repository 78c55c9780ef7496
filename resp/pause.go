package resp

import (
	"time"

	"shardproxy/codec"
)

// Cmd numbers of CLIENT PAUSE and UNPAUSE, which the parser marks
// (codec.Request.Pause).
var (
	cmdClientPause   = lookup("client|pause")
	cmdClientUnpause = lookup("client|unpause")
)

// pause marks a CLIENT PAUSE timeout [WRITE|ALL] whose arguments the
// servers will take, with its timeout in req.Block, and a CLIENT UNPAUSE.
// A CLIENT PAUSE they will refuse stays unmarked: the proxy starts no
// pause the servers do not.
func (p *parser) pause(req *codec.Request, cmd int) {
	if cmd == cmdClientUnpause {
		req.Pause = codec.PauseOff
		return
	}
	ms, ok := parseInt(p.arg(2))
	if !ok || ms < 0 || p.argc() > 4 {
		return
	}
	if p.argc() == 4 && !equalFold(p.arg(3), "write") && !equalFold(p.arg(3), "all") {
		return
	}
	req.Pause = codec.PauseOn
	req.Block = time.Duration(min(ms, int64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
}
