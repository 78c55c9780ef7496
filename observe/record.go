package observe

import (
	"strconv"
	"time"
)

// Result classifies a request's answer.
type Result uint8

// Results of a request.
const (
	// ResultOK is a reply that is neither a miss nor an error.
	ResultOK Result = iota
	// ResultHit is a lookup that found every key.
	ResultHit
	// ResultMiss is a lookup that found none, or some, of its keys.
	ResultMiss
	// ResultError is an error reply, or no reply from a server.
	ResultError
)

func (r Result) String() string {
	switch r {
	case ResultHit:
		return "hit"
	case ResultMiss:
		return "miss"
	case ResultError:
		return "error"
	}
	return "ok"
}

// MaxKey bounds the key bytes a Record carries; a longer key is cut.
const MaxKey = 250

// Record is one client request as the views see it. The times are those
// of its way through the proxy:
//
//	Read     the session read the request from the client's socket
//	Queued   the router queued it for a backend (zero: no backend call);
//	         a sharded pool's calls take the time of their read
//	Sent     the backend handed it to the server's socket
//	Replied  the backend framed the server's reply
//	Written  the session handed the reply to the client's socket
//
// For a request fanned out to several backends the backend times are
// those of its slowest call, and Backend names that call's server. Traces
// read the same fields.
type Record struct {
	Pool     string
	Protocol string // the pool's dialect: "memcache", "redis"
	Command  string // as the dialect names it: "get", "client|setname"
	Key      []byte // the first key, at most MaxKey bytes; nil for none
	Keys     int    // how many keys the request has
	Args     []byte // the request as the client sent it, cut (see MaxArgs)
	Client   string // the client's address
	Name     string // the client's name (Redis's CLIENT SETNAME), "" for none
	Backend  string // the server of the (slowest) backend call, "" for none
	Calls    int    // backend calls the request made

	Read, Queued, Sent, Replied, Written time.Time

	Result     Result
	ReplyBytes int64
}

// MaxArgs bounds the bytes of a request a Record carries for the slowlog.
const MaxArgs = 512

// Total is the time from read to written.
func (r *Record) Total() time.Duration { return r.Written.Sub(r.Read) }

// Phases splits Total into where the time went: in the proxy before the
// request was queued (reading, routing), queued for the backend's socket,
// at the server (on the wire and in the server), and in the proxy after
// the reply (waiting for earlier replies, writing). Without a backend
// call, all of it is proxy time (in).
func (r *Record) Phases() (in, queued, server, out time.Duration) {
	if r.Queued.IsZero() {
		return r.Total(), 0, 0, 0
	}
	in = nonNeg(r.Queued.Sub(r.Read))
	switch {
	case r.Sent.IsZero(): // answered before it reached a socket
		return in, 0, 0, nonNeg(r.Written.Sub(r.Queued))
	case r.Replied.IsZero(): // the socket failed, or the call timed out
		return in, nonNeg(r.Sent.Sub(r.Queued)), nonNeg(r.Written.Sub(r.Sent)), 0
	}
	return in, nonNeg(r.Sent.Sub(r.Queued)), nonNeg(r.Replied.Sub(r.Sent)), nonNeg(r.Written.Sub(r.Replied))
}

func nonNeg(d time.Duration) time.Duration { return max(d, 0) }

// AppendLine appends r as one tap line, in the manner of redis-cli
// monitor: the unix time with microseconds, [pool client], the command
// and key quoted, then the backend, the total and server times in
// microseconds and the result.
//
//	1732881600.123456 [cache 127.0.0.1:50412] "get" "user:1" backend=s1 total_us=52110 server_us=50050 result=hit
func (r *Record) AppendLine(dst []byte) []byte {
	t := r.Read
	dst = strconv.AppendInt(dst, t.Unix(), 10)
	dst = append(dst, '.')
	us := t.Nanosecond() / 1000
	for d := 100000; d > 1 && us < d; d /= 10 {
		dst = append(dst, '0')
	}
	dst = strconv.AppendInt(dst, int64(us), 10)
	dst = append(dst, " ["...)
	dst = append(dst, r.Pool...)
	dst = append(dst, ' ')
	dst = append(dst, r.Client...)
	dst = append(dst, "] "...)
	dst = strconv.AppendQuote(dst, r.Command)
	if r.Key != nil {
		dst = append(dst, ' ')
		dst = strconv.AppendQuote(dst, string(r.Key))
	}
	if r.Backend != "" {
		dst = append(dst, " backend="...)
		dst = append(dst, r.Backend...)
	}
	_, _, server, _ := r.Phases()
	dst = append(dst, " total_us="...)
	dst = strconv.AppendInt(dst, r.Total().Microseconds(), 10)
	dst = append(dst, " server_us="...)
	dst = strconv.AppendInt(dst, server.Microseconds(), 10)
	dst = append(dst, " result="...)
	dst = append(dst, r.Result.String()...)
	return append(dst, '\n')
}
