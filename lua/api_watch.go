package lua

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/route"
)

// This file writes the lines memcached's proxy gives its watchers (watch
// proxyreqs, proxyevents, proxyuser) to the router's Hub, in memcached
// 1.6.45's format: "ts=SECONDS.MICROSECONDS gid=N type=... \n" (the
// microseconds unpadded, as memcached prints them). A line is made only
// when a client watches its stream. The proxy's log gets these events
// too, as before.

// Caps of memcached's log entries.
const (
	watchMaxReq    = 300 // bytes of the request line in a proxy_req line
	watchMaxDetail = 150 // bytes of its detail
)

// Response types of memcached's mcmc (MCMC_RESP_*), a proxy_req line's
// second type=.
const (
	respGet     = 100
	respMeta    = 101
	respStat    = 102
	respGeneric = 104
	respEnd     = 105
	respVersion = 106
	respNumeric = 107
	respErrMsg  = 108
)

// watchHead starts a line: the time and the next line number.
func (r *Router) watchHead() []byte { return watchHead(r.cfg.Hub) }

// watchHead starts a line of hub's: the time and its next line number.
func watchHead(hub *route.Hub) []byte {
	now := time.Now()
	b := make([]byte, 0, 128)
	b = append(b, "ts="...)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(now.Nanosecond()/1000), 10)
	b = append(b, " gid="...)
	b = strconv.AppendUint(b, hub.NextID(), 10)
	return append(b, ' ')
}

// watchDeletions is the internal cache's store.Config.Deleted: memcached's
// deletions line for hub, the key URI-encoded and class 1 for every item
// (the store has no slab classes: kind_stats.go).
func watchDeletions(hub *route.Hub) func(key, cmd string, size int) {
	return func(key, cmd string, size int) {
		if !hub.Watching(codec.WatchDeletions) {
			return
		}
		b := append(watchHead(hub), "type=deleted key="...)
		b = appendURIEncoded(b, key)
		b = append(append(b, " cmd="...), cmd...)
		b = strconv.AppendInt(append(b, " clsid=1 size="...), int64(size), 10)
		hub.Publish(codec.WatchDeletions, append(b, '\n'))
	}
}

// appendURIEncoded appends s with every byte but letters, digits and
// "-._~" written %XX, as memcached writes keys in its log lines.
func appendURIEncoded(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return b
}

// watchUser publishes mcp.log's msg (proxyuser).
func (r *Router) watchUser(msg string) {
	if !r.cfg.Hub.Watching(codec.WatchProxyUser) {
		return
	}
	b := append(r.watchHead(), "type=proxy_user msg="...)
	b = append(append(b, msg...), '\n')
	r.cfg.Hub.Publish(codec.WatchProxyUser, b)
}

// watchError publishes a route's error (proxyevents).
func (r *Router) watchError(msg string) {
	if !r.cfg.Hub.Watching(codec.WatchProxyEvents) {
		return
	}
	b := append(r.watchHead(), "type=proxy_error msg="...)
	b = append(append(b, msg...), '\n')
	r.cfg.Hub.Publish(codec.WatchProxyEvents, b)
}

// watchBackend publishes a failed backend call (proxyevents), but for one
// failed at once because its backend is marked bad, which memcached's
// proxy does not log either.
func (r *Router) watchBackend(be *beRef, err error) {
	var bf *backend.Error
	if be == nil || !errors.As(err, &bf) || bf.Cause == backend.CauseMarkedBad ||
		!r.cfg.Hub.Watching(codec.WatchProxyEvents) {
		return
	}
	b := append(r.watchHead(), "type=proxy_backend error="...)
	b = append(b, bf.Cause.String()...)
	b = append(append(b, " name="...), be.host...)
	b = append(append(b, " port="...), be.port...)
	b = append(append(b, " label="...), be.label...)
	b = append(b, " depth=0 rbuf=\n"...)
	r.cfg.Hub.Publish(codec.WatchProxyEvents, b)
}

// watchRequest publishes mcp.log_req's line (proxyreqs): the response's
// timing, mcmc type, code and status, whether it was good, ok or neither,
// the client number the script passed (cfd), the backend, the detail and
// the request line as sent.
func (r *Router) watchRequest(req *codec.Request, res *response, detail string, cfd int) {
	if !r.cfg.Hub.Watching(codec.WatchProxyReqs) {
		return
	}
	var elapsed int64
	typ, code, status := 0, 0, mcmcOK
	host, port := "", ""
	if res != nil {
		res.parse()
		elapsed, typ, code, status = res.elapsed.Microseconds(), res.respType(), res.code, res.status
		if res.be != nil {
			host, port = res.be.host, res.be.port
		}
	}
	verdict := "any"
	if status == mcmcOK {
		verdict = "good"
		if code == codeEnd {
			verdict = "ok"
		}
	}
	b := append(r.watchHead(), "type=proxy_req elapsed="...)
	b = strconv.AppendInt(b, elapsed, 10)
	b = strconv.AppendInt(append(b, " type="...), int64(typ), 10)
	b = strconv.AppendInt(append(b, " code="...), int64(code), 10)
	b = strconv.AppendInt(append(b, " status="...), int64(status), 10)
	b = append(append(b, " res="...), verdict...)
	b = strconv.AppendInt(append(b, " cfd="...), int64(cfd), 10)
	b = append(append(append(append(b, " be="...), host...), ':'), port...)
	b = append(append(b, " detail="...), detail[:min(len(detail), watchMaxDetail)]...)
	b = append(b, " req="...)
	if req != nil {
		line := firstLine(req.Wire)
		b = append(b, line[:min(len(line), watchMaxReq)]...)
	}
	r.cfg.Hub.Publish(codec.WatchProxyReqs, append(b, '\n'))
}

// respType is the mcmc response type of the reply (0 for none).
func (res *response) respType() int {
	if res.err != nil || res.redis {
		return 0
	}
	word, _, _ := bytes.Cut(firstLine(res.raw), []byte(" "))
	switch {
	case len(word) > 0 && word[0] >= '0' && word[0] <= '9':
		return respNumeric
	case string(word) == "VALUE":
		return respGet
	case string(word) == "END":
		return respEnd
	case string(word) == "STAT":
		return respStat
	case string(word) == "VERSION":
		return respVersion
	case string(word) == "ERROR", string(word) == "CLIENT_ERROR", string(word) == "SERVER_ERROR":
		return respErrMsg
	case len(word) == 2:
		return respMeta
	}
	return respGeneric
}
