package lua

import (
	"bytes"
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

// watchHead starts a line of h's: the time and the next line number.
func watchHead(h *route.Hub) []byte {
	now := time.Now()
	b := make([]byte, 0, 128)
	b = append(b, "ts="...)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(now.Nanosecond()/1000), 10)
	b = append(b, " gid="...)
	b = strconv.AppendUint(b, h.NextID(), 10)
	return append(b, ' ')
}

// watchDeletion publishes to h that cmd deleted key, whose value was size
// bytes, from the internal cache (deletions): memcached's line, the key
// URI-encoded, the slab class the store's one, 1.
func watchDeletion(h *route.Hub, key, cmd string, size int) {
	if h == nil || !h.Watching(codec.WatchDeletions) {
		return
	}
	b := append(watchHead(h), "type=deleted key="...)
	b = appendURIEscaped(b, key)
	b = append(append(b, " cmd="...), cmd...)
	b = append(b, " clsid=1 size="...)
	b = strconv.AppendInt(b, int64(size), 10)
	h.Publish(codec.WatchDeletions, append(b, '\n'))
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

// watchConf publishes a reload's progress (proxyevents):
// "type=proxy_conf status=start|done|failed".
func (r *Router) watchConf(status string) {
	if !r.cfg.Hub.Watching(codec.WatchProxyEvents) {
		return
	}
	b := append(r.watchHead(), "type=proxy_conf status="...)
	b = append(append(b, status...), '\n')
	r.cfg.Hub.Publish(codec.WatchProxyEvents, b)
}

// Reloaded tells the watchers that the router serves after a reload.
func (r *Router) Reloaded() { r.watchConf("done") }

// ReloadFailed tells the watchers why a reload failed: its error, as a
// route error, then "status=failed"; the router goes on serving.
func (r *Router) ReloadFailed(err error) {
	r.watchError(strings.ReplaceAll(err.Error(), "\n", " ")) // one line
	r.watchConf("failed")
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

// watchMaxRbuf caps the bytes of a proxy_backend line's rbuf, before
// they are escaped.
const watchMaxRbuf = 100

// backendEvents returns the backend.Config.OnEvent of the backend s
// describes: it publishes the backend's failures and its being marked
// bad to h's watchers of proxyevents, as memcached's proxy logs them:
// "type=proxy_backend error=CAUSE name=HOST port=PORT label=LABEL",
// then "depth=N rbuf=BYTES" (the bytes read and not framed, escaped as
// in a URI), or "retry=SECONDS" for markedbad with a retry of a second
// or more. It holds h, not the router: the backend may outlive it.
func backendEvents(h *route.Hub, s *beSpec) func(*backend.Backend, backend.Event) {
	return func(_ *backend.Backend, e backend.Event) {
		if !h.Watching(codec.WatchProxyEvents) {
			return
		}
		b := append(watchHead(h), "type=proxy_backend error="...)
		b = append(b, e.Cause.String()...)
		b = append(append(b, " name="...), s.host...)
		b = append(append(b, " port="...), s.port...)
		b = append(append(b, " label="...), s.label...)
		if retry := int64(e.Retry / time.Second); e.Cause == backend.CauseMarkedBad && retry != 0 {
			b = strconv.AppendInt(append(b, " retry="...), retry, 10)
		} else {
			b = strconv.AppendInt(append(b, " depth="...), int64(e.Depth), 10)
			b = appendURIEscaped(append(b, " rbuf="...), e.Rbuf[:min(len(e.Rbuf), watchMaxRbuf)])
		}
		h.Publish(codec.WatchProxyEvents, append(b, '\n'))
	}
}

// appendURIEscaped appends src with every byte but letters, digits and
// "-._~" written as %XX, as memcached's logger escapes keys and buffers.
func appendURIEscaped[T string | []byte](dst []byte, src T) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~':
			dst = append(dst, c)
		default:
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return dst
}

// watchRequest publishes mcp.log_req's line (proxyreqs): the response's
// timing, mcmc type, code and status, whether it was good, ok or neither,
// the client number the script passed (cfd), the backend, the detail and
// the request line as sent. A V1 file's line has memcached 1.6.22's
// fields, without the verdict and cfd.
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
	if !r.v1 { // memcached 1.6.22's line had neither
		b = append(append(b, " res="...), verdict...)
		b = strconv.AppendInt(append(b, " cfd="...), int64(cfd), 10)
	}
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
