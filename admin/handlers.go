package admin

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"time"

	"shardproxy/config"
)

// handlers are the HTTP admin endpoints.
type handlers struct {
	src    Source
	reload func() (ReloadResult, error)
	drain  func()
	log    *slog.Logger
	hist   *history // the status page's samples
}

// authorize wants "Authorization: Bearer <admin_token>" when the running
// config sets a token. The token is compared in constant time.
func (h *handlers) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token := h.token(); token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="shardproxy"`)
				writeJSON(w, http.StatusUnauthorized, errorReply{Error: "admin: missing or wrong bearer token"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (h *handlers) token() string {
	if cfg := h.src.Info().Config; cfg != nil {
		return cfg.Admin.Token
	}
	return ""
}

// Headers of GET /config.
const (
	headerSource   = "X-Shardproxy-Config-Source"
	headerChecksum = "X-Shardproxy-Config-Checksum"
	headerLoadedAt = "X-Shardproxy-Config-Loaded-At"
)

// config writes the running config as YAML, secrets redacted. The source
// file, checksum and load time are in headers and, so that a person reading
// it sees them too, in comments before the YAML.
func (h *handlers) config(w http.ResponseWriter, r *http.Request) {
	info := h.src.Info()
	if info.Config == nil {
		writeJSON(w, http.StatusServiceUnavailable, errorReply{Error: "admin: no configuration loaded"})
		return
	}
	body, err := RedactedYAML(info.Config)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorReply{Error: err.Error()})
		return
	}
	loaded := info.LoadedAt.UTC().Format(time.RFC3339Nano)
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	w.Header().Set(headerSource, info.Source)
	w.Header().Set(headerChecksum, info.Checksum)
	w.Header().Set(headerLoadedAt, loaded)
	fmt.Fprintf(w, "# source: %q\n# checksum: %s\n# loaded_at: %s\n", info.Source, info.Checksum, loaded)
	w.Write(body)
}

// backendsReply is GET /backends.
type backendsReply struct {
	Pools []poolReply `json:"pools"`
}

type poolReply struct {
	Name     string         `json:"name"`
	Protocol string         `json:"protocol"`
	Backends []backendReply `json:"backends"`
}

type backendReply struct {
	Name        string     `json:"name"`
	Addr        string     `json:"addr"`
	State       string     `json:"state"` // up, failing, bad, probing
	Failures    int        `json:"failures"`
	LastCause   string     `json:"last_cause"`
	RetryAt     *time.Time `json:"retry_at"` // null unless bad
	Ejects      int64      `json:"ejects"`
	Connections int64      `json:"connections"`
}

func (h *handlers) backends(w http.ResponseWriter, r *http.Request) {
	st := h.src.Stats()
	reply := backendsReply{Pools: make([]poolReply, 0, len(st.Pools))}
	for _, p := range st.Pools {
		pr := poolReply{Name: p.Name, Protocol: p.Protocol, Backends: make([]backendReply, 0, len(p.Servers))}
		for _, s := range p.Servers {
			br := backendReply{Name: s.Name, Addr: s.Addr, State: state(s), Failures: s.State.Failures,
				LastCause: s.State.LastCause, Ejects: s.Ejects, Connections: s.ServerConnections}
			if s.State.Bad && !s.State.RetryAt.IsZero() {
				t := s.State.RetryAt.UTC()
				br.RetryAt = &t
			}
			pr.Backends = append(pr.Backends, br)
		}
		reply.Pools = append(reply.Pools, pr)
	}
	writeJSON(w, http.StatusOK, reply)
}

// versionReply is GET /version.
type versionReply struct {
	Version   string    `json:"version"`
	GoVersion string    `json:"go_version"`
	StartedAt time.Time `json:"started_at"`
	Uptime    int64     `json:"uptime_seconds"`
	// Threads is GOMAXPROCS: how many threads run the proxy at once
	// (shardproxy's -threads).
	Threads int `json:"threads"`
}

func (h *handlers) version(w http.ResponseWriter, r *http.Request) {
	st := h.src.Stats()
	writeJSON(w, http.StatusOK, versionReply{Version: st.Version, GoVersion: runtime.Version(),
		StartedAt: st.Start.UTC(), Uptime: int64(time.Since(st.Start) / time.Second), Threads: runtime.GOMAXPROCS(0)})
}

// reloadReply is POST /reload's answer on success.
type reloadReply struct {
	OK       bool     `json:"ok"`
	Source   string   `json:"source"`
	Checksum string   `json:"checksum"`
	TookMS   float64  `json:"took_ms"`
	Warnings []string `json:"warnings,omitempty"`
}

// errorReply is every error's answer.
type errorReply struct {
	OK    bool   `json:"ok"` // always false
	Error string `json:"error"`
}

// reloadNow runs the reload: 200 when it took, 422 when the file does not
// parse or validate, 500 for anything else (unreadable file, a listener
// that cannot bind), 501 without a reload function.
func (h *handlers) reloadNow(w http.ResponseWriter, r *http.Request) {
	if h.reload == nil {
		writeJSON(w, http.StatusNotImplemented, errorReply{Error: "admin: reload is not available"})
		return
	}
	res, err := h.reload()
	if err != nil {
		code := http.StatusInternalServerError
		var ce *config.Error
		if errors.As(err, &ce) {
			code = http.StatusUnprocessableEntity
		}
		writeJSON(w, code, errorReply{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, reloadReply{OK: true, Source: res.Source, Checksum: res.Checksum,
		TookMS: float64(res.Took.Microseconds()) / 1000, Warnings: res.Warnings})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"ok":false,"error":"admin: cannot encode the reply"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// Redacted replaces a secret's value in GET /config.
const Redacted = "REDACTED"

// RedactedYAML returns cfg as nutcracker.yml text (config.Marshal) with
// every redis_auth and the admin_token replaced by Redacted, followed by
// the shardproxy: admin section when cfg has one. cfg is not changed.
func RedactedYAML(cfg *config.Config) ([]byte, error) {
	c := *cfg
	c.Pools = make([]*config.Pool, len(cfg.Pools))
	for i, p := range cfg.Pools {
		cp := *p
		if cp.RedisAuth != "" {
			cp.RedisAuth = Redacted
		}
		c.Pools[i] = &cp
	}
	b, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	return appendAdmin(b, cfg.Admin), nil
}

// appendAdmin appends the shardproxy: section, which config.Marshal does not
// write. Values are double-quoted; Go's escapes are YAML's for the ASCII
// that addresses hold.
func appendAdmin(b []byte, a config.Admin) []byte {
	if a.StatsListen == "" && a.HTTPListen == "" && a.Token == "" && a.Traces.Endpoint == "" {
		return b
	}
	b = append(b, config.AdminSection+":\n"...)
	if a.StatsListen != "" {
		b = fmt.Appendf(b, "  stats_listen: %q\n", a.StatsListen)
	}
	if a.HTTPListen != "" {
		b = fmt.Appendf(b, "  admin_listen: %q\n", a.HTTPListen)
	}
	if a.Token != "" {
		b = fmt.Appendf(b, "  admin_token: %q\n", Redacted)
	}
	if t := a.Traces; t.Endpoint != "" {
		b = fmt.Appendf(b, "  trace_endpoint: %q\n  trace_sample: %v\n  trace_slow: %v\n", t.Endpoint, t.Sample, !t.SlowOff)
		if t.Service != "" {
			b = fmt.Appendf(b, "  trace_service: %q\n", t.Service)
		}
	}
	return b
}
