package admin

import (
	"bytes"
	"compress/gzip"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

// web holds the status page's template, style sheet and script; they are
// compiled into the binary, and the page loads nothing from elsewhere.
//
//go:embed web
var web embed.FS

// pageTemplate renders the status page ("page") and its live part
// ("live"). html/template escapes every name that comes from the
// configuration for its context.
var pageTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"rate":        fmtRate,
	"latency":     fmtLatency,
	"usec":        fmtUsec,
	"since":       fmtSince,
	"retry":       fmtRetry,
	"probe":       fmtProbe,
	"graphLen":    func() int { return graphLen },
	"graphHeight": func() int { return graphHeight },
	"graph":       graphOf,
}).ParseFS(web, "web/status.html"))

// drawn is one line of a graph: an SVG path and the value at its top.
type drawn struct {
	D   string
	Max optFloat
}

// graphOf draws the values of g named by which: rps, eps or redirects.
func graphOf(g []graphPoint, which string) drawn {
	f := func(p graphPoint) optFloat { return p.RPS }
	switch which {
	case "eps":
		f = func(p graphPoint) optFloat { return p.EPS }
	case "redirects":
		f = func(p graphPoint) optFloat { return p.Redirects }
	}
	d, top := graphPath(g, f)
	return drawn{D: d, Max: optFloat(top)}
}

// contentPolicy lets the page load its own style sheet and script and
// fetch its live part, and nothing else.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// page serves GET /: the whole status page, rendered on the server.
func (h *handlers) page(w http.ResponseWriter, r *http.Request) { h.render(w, r, "page") }

// live serves GET /status/live: the page's live part, which the page's
// script fetches every second and swaps in.
func (h *handlers) live(w http.ResponseWriter, r *http.Request) { h.render(w, r, "live") }

func (h *handlers) render(w http.ResponseWriter, r *http.Request, name string) {
	h.hist.fresh()
	var b bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&b, name, h.view()); err != nil {
		h.log.Error("status page", "err", err)
		http.Error(w, "admin: cannot render the status page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", contentPolicy)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeMaybeGzip(w, r, b.Bytes())
}

// pageSlowlog is how many of a pool's slowlog entries the page shows.
const pageSlowlog = 10

// view is the status page's view: the history's, with each pool's
// newest slowlog entries.
func (h *handlers) view() statusView {
	v := h.hist.view(h.src.Info())
	o, ok := h.src.(Observer)
	if !ok {
		return v
	}
	sl := slowlogOf(o.Slowlogs(pageSlowlog), "")
	for i := range v.Pools {
		for j := range sl.Pools {
			if sl.Pools[j].Pool == v.Pools[i].Name {
				v.Pools[i].Slowlog = &sl.Pools[j]
			}
		}
	}
	return v
}

// writeMaybeGzip writes body gzipped when the client takes gzip: the
// graphs' paths are most of a page with many servers, and shrink several
// times over.
func writeMaybeGzip(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Add("Vary", "Accept-Encoding")
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Write(body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	zw.Write(body)
	zw.Close()
}

// status serves GET /status: the page's figures as JSON.
func (h *handlers) status(w http.ResponseWriter, r *http.Request) {
	h.hist.fresh()
	writeJSON(w, http.StatusOK, h.view())
}

// assets serves the embedded style sheet and script under /static/; the
// routes name each file, so nothing else of web/ is served.
func assets() http.Handler {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
