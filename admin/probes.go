package admin

import (
	"io"
	"net/http"
)

// readier is a Source that says whether it should be sent clients
// (proxy.Server.Ready). A Source without it is ready while it answers.
type readier interface {
	Ready() (ok bool, reason string)
}

// probes routes GET /live and GET /ready to their handlers, without the
// token (a prober has none), and everything else to next.
func (h *handlers) probes(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", h.liveProbe)
	mux.HandleFunc("GET /ready", h.readyProbe)
	mux.Handle("/", next)
	return mux
}

// liveProbe answers 200 "live": the process runs and serves HTTP; it
// depends on no backend, and stays live while draining, so that a
// supervisor does not kill a drain.
func (h *handlers) liveProbe(w http.ResponseWriter, r *http.Request) {
	writeText(w, http.StatusOK, "live\n")
}

// readyProbe answers 200 "ready" when the Source is ready, else 503 and
// the reason in a word ("starting", "draining").
func (h *handlers) readyProbe(w http.ResponseWriter, r *http.Request) {
	if rd, ok := h.src.(readier); ok {
		if ready, reason := rd.Ready(); !ready {
			writeText(w, http.StatusServiceUnavailable, reason+"\n")
			return
		}
	}
	writeText(w, http.StatusOK, "ready\n")
}

// drainNow starts the drain (HTTPConfig.Drain): 202, as the drain runs on
// after the reply; 501 without a drain function.
func (h *handlers) drainNow(w http.ResponseWriter, r *http.Request) {
	if h.drain == nil {
		writeJSON(w, http.StatusNotImplemented, errorReply{Error: "admin: drain is not available"})
		return
	}
	h.drain()
	writeJSON(w, http.StatusAccepted, drainReply{OK: true})
}

// drainReply is POST /drain's answer.
type drainReply struct {
	OK bool `json:"ok"`
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	io.WriteString(w, body)
}
