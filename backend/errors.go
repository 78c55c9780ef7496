package backend

// Cause names why a request got no reply from its backend. The names are
// memcached's proxy's backend failure names, so operators see the same words.
type Cause uint8

// Failure causes.
const (
	CauseTimeout         Cause = iota // no reply within the request's timeout
	CauseDisconnected                 // the server closed the socket
	CauseConnecting                   // dial failed or timed out
	CauseReadValidate                 // reading the handshake reply failed
	CauseBadValidate                  // the handshake reply was not OK
	CauseWriting                      // writing to the socket failed
	CauseReading                      // reading from the socket failed
	CauseParsing                      // the reply could not be framed: desync
	CauseTrailingData                 // bytes arrived with no request waiting
	CauseMarkedBad                    // the backend is marked bad until its retry time
	CauseClosed                       // the backend was closed by the proxy
	CauseInvalidProtocol              // a reply that breaks the stream (Config.BreaksStream) was passed on
	CauseOutOfMemory                  // a reply arrived while its call's Over said the buffers were full
	CauseReplay                       // the requests Config.Replay sends on a new socket were not all answered
	numCauses
)

var causeNames = [numCauses]string{
	CauseTimeout:         "timeout",
	CauseDisconnected:    "disconnected",
	CauseConnecting:      "connecting",
	CauseReadValidate:    "readvalidate",
	CauseBadValidate:     "badvalidate",
	CauseWriting:         "writing",
	CauseReading:         "reading",
	CauseParsing:         "parsing",
	CauseTrailingData:    "trailingdata",
	CauseMarkedBad:       "markedbad",
	CauseClosed:          "closed",
	CauseInvalidProtocol: "invalidprotocol",
	CauseOutOfMemory:     "outofmemory",
	CauseReplay:          "replay",
}

// String returns the cause's name, e.g. "timeout".
func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "unknown"
}

// Error is the failure a Call completes with when it gets no reply.
type Error struct {
	Cause Cause
}

// Error returns the text the client sees after the protocol's error prefix,
// e.g. "backend failure: timeout".
func (e *Error) Error() string { return "backend failure: " + e.Cause.String() }

// errs holds one Error per cause so failing a call does not allocate.
var errs = func() (a [numCauses]*Error) {
	for i := range a {
		a[i] = &Error{Cause: Cause(i)}
	}
	return a
}()

// ErrorFor returns the shared *Error for cause c.
func ErrorFor(c Cause) *Error { return errs[c] }
