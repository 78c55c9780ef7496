package resp

import (
	"math"
	"strconv"
	"time"

	"shardproxy/codec"
)

// maxBlock is the longest timeout the proxy counts as a timeout: a longer
// one (about 292 years) waits forever, as 0 does.
const maxBlock = math.MaxInt64 / 2

// blockTimeout returns how long the request may hold its server connection
// by its own timeout argument (see codec.Request.Block): 0 forever,
// negative when the argument is no timeout redis-server accepts, which it
// then refuses at once.
func (p *parser) blockTimeout(c *command) time.Duration {
	switch c.block {
	case blockLast:
		return seconds(p.arg(p.argc() - 1))
	case blockFirst:
		return seconds(p.arg(1))
	case blockMs2:
		return millis(p.arg(2))
	}
	return -1
}

// xreadBlock returns the timeout of XREAD's or XREADGROUP's BLOCK option,
// which streamsPositions found: the argument after the first BLOCK among
// the options before STREAMS.
func (p *parser) xreadBlock() time.Duration {
	for i := 1; i+1 < p.argc(); i++ {
		switch a := p.arg(i); {
		case equalFold(a, "block"):
			return millis(p.arg(i + 1))
		case equalFold(a, "streams"):
			return -1
		case equalFold(a, "count"):
			i++
		case equalFold(a, "group"):
			i += 2
		}
	}
	return -1
}

// seconds reads a timeout in seconds, as redis-server's
// getTimeoutFromObjectOrReply does for BLPOP and the like: a decimal
// number, not negative.
func seconds(b []byte) time.Duration {
	f, err := strconv.ParseFloat(string(b), 64)
	switch {
	case err != nil || math.IsNaN(f) || f < 0:
		return -1
	case f*float64(time.Second) >= maxBlock:
		return 0
	}
	// Redis counts whole milliseconds, rounded up: no positive timeout
	// is 0, which waits forever.
	return time.Duration(math.Ceil(f*1000)) * time.Millisecond
}

// millis reads a timeout in milliseconds (XREAD BLOCK, WAIT): an integer,
// not negative.
func millis(b []byte) time.Duration {
	n, ok := parseInt(b)
	switch {
	case !ok || n < 0:
		return -1
	case n >= maxBlock/int64(time.Millisecond):
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// blockRoute sets the route of a request that may block: RouteBlock with
// its timeout.
func blockRoute(req *codec.Request, d time.Duration) {
	req.Route = codec.RouteBlock
	req.Block = d
}
