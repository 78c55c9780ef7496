package backend_test

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"shardproxy/codec"
)

// resuming wraps a dialect with a ResumeReply that really resumes, for
// arrays of bulk strings (arrayServer's big replies), and checks that its
// caller keeps its side of the contract: each call passes the reply from
// its first byte again, with the bytes framed so far where they were.
// Other replies go to the wrapped dialect.
type resuming struct {
	codec.Dialect
	examined atomic.Int64 // bytes looked at, summed over calls

	mu       sync.Mutex
	framed   map[*codec.ReplyState][]byte // the bytes just before st.Off, as last seen
	violated error                        // the first breach of the contract
}

// window is how many bytes before st.Off are checked on a resumed call.
const window = 32

func (d *resuming) ResumeReply(buf []byte, req *codec.Request, st *codec.ReplyState) (int, codec.ReplyKind, error) {
	if st.Off == 0 && (len(buf) == 0 || buf[0] != '*') {
		return d.Dialect.ResumeReply(buf, req, st)
	}
	if st.Off > 0 {
		d.check(buf, st)
	} else {
		line, next, ok := replyLine(buf, 0)
		if !ok {
			d.examined.Add(int64(len(buf)))
			return 0, 0, codec.ErrIncomplete
		}
		n, err := strconv.Atoi(string(line))
		if err != nil || n < 0 {
			return d.Dialect.ResumeReply(buf, req, st)
		}
		d.examined.Add(int64(next))
		st.Off, st.Left = next, int64(n)
	}
	for st.Left > 0 {
		if st.Off < len(buf) && buf[st.Off] != '$' { // not a flat array
			*st = codec.ReplyState{}
			return d.Dialect.ResumeReply(buf, req, st)
		}
		line, next, ok := replyLine(buf, st.Off)
		end := 0
		if ok {
			size, err := strconv.Atoi(string(line))
			if err != nil || size < 0 {
				*st = codec.ReplyState{}
				return 0, 0, fmt.Errorf("bad bulk length %q", line)
			}
			end = next + size + 2
		}
		if !ok || end > len(buf) {
			d.examined.Add(int64(len(buf) - st.Off))
			d.keep(buf, st)
			return 0, 0, codec.ErrIncomplete
		}
		d.examined.Add(int64(end - st.Off))
		st.Off, st.Left = end, st.Left-1
	}
	n := st.Off
	*st = codec.ReplyState{}
	d.forget(st)
	return n, codec.ReplyOK, nil
}

// replyLine returns the line at buf[pos:] after its type byte, without
// "\r\n", and the offset after it; false if the line is incomplete.
func replyLine(buf []byte, pos int) ([]byte, int, bool) {
	i := bytes.Index(buf[pos:], []byte("\r\n"))
	if i < 0 {
		return nil, 0, false
	}
	return buf[pos+1 : pos+i], pos + i + 2, true
}

func (d *resuming) keep(buf []byte, st *codec.ReplyState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.framed == nil {
		d.framed = map[*codec.ReplyState][]byte{}
	}
	d.framed[st] = append(d.framed[st][:0], buf[max(0, st.Off-window):st.Off]...)
}

func (d *resuming) forget(st *codec.ReplyState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.framed, st)
}

// check records a breach: a resumed call whose bytes are not the ones
// framed before, at the same offsets.
func (d *resuming) check(buf []byte, st *codec.ReplyState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	want, ok := d.framed[st]
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("resumed at %d with a state this dialect never left there", st.Off)
	case len(buf) < st.Off || buf[0] != '*':
		err = fmt.Errorf("resumed at %d with %d bytes starting %q", st.Off, len(buf), buf[:min(len(buf), 8)])
	case !bytes.Equal(buf[st.Off-len(want):st.Off], want):
		err = fmt.Errorf("the bytes before %d moved: %q, want %q", st.Off, buf[st.Off-len(want):st.Off], want)
	}
	if err != nil && d.violated == nil {
		d.violated = err
	}
}

// breach returns the first breach of the contract, if any.
func (d *resuming) breach() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.violated
}
