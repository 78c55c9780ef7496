package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Route is what a route pool does with its requests (key route): one of
// Migrate, WarmUp, or Pool with Shadow and Failover around it.
type Route struct {
	// Migrate moves the pool's keys from one pool to another in phases.
	Migrate *Migrate
	// WarmUp answers from a cold pool and fills it from a warm one.
	WarmUp *WarmUp
	// Pool is the pool that answers (key pool), when neither Migrate nor
	// WarmUp is set; Shadow and Failover go with it.
	Pool string
	// Shadow copies some of the requests to another pool.
	Shadow *Shadow
	// Failover sends a request Pool failed to another pool.
	Failover *RouteFailover
}

// Migrate is a route's migrate: the phase of a move from From to To.
type Migrate struct {
	From, To string
	// Phase is one of the Phase constants: the phase until the first of
	// At, or for good without At.
	Phase string
	// At (key at) moves the migration to later phases by the clock: each
	// entry's phase from its time on. In the order of the phases, and
	// after Phase; times in RFC 3339.
	At []PhaseAt
}

// PhaseAt is a phase and when it starts.
type PhaseAt struct {
	Phase string
	At    time.Time
}

// PhaseNow returns the phase of m at now.
func (m *Migrate) PhaseNow(now time.Time) string {
	phase := m.Phase
	for _, a := range m.At {
		if !now.Before(a.At) {
			phase = a.Phase
		}
	}
	return phase
}

// The phases of a migration (Migrate.Phase), in their order.
const (
	// PhaseFromOnly sends everything to From: the start, and an abort.
	PhaseFromOnly = "from_only"
	// PhaseDualWrite reads From and writes both.
	PhaseDualWrite = "dual_write"
	// PhaseWarm writes both and reads a one-key get from To, falling
	// back to From (and filling To) on a miss.
	PhaseWarm = "warm"
	// PhaseToOnly sends everything to To and deletes written keys on From.
	PhaseToOnly = "to_only"
)

// phases are the phases in order.
var phases = []string{PhaseFromOnly, PhaseDualWrite, PhaseWarm, PhaseToOnly}

// WarmUp is a route's warm_up: Cold answers, a miss is read from Warm and
// filled into Cold.
type WarmUp struct {
	Cold, Warm string
}

// Shadow is a route's shadow: a Fraction of the Requests copied to Pool,
// with at most Queue copies in flight.
type Shadow struct {
	Pool string
	// Fraction is in (0, 1]; default 1.
	Fraction float64
	// Requests is ShadowReads, ShadowWrites or ShadowAll (the default).
	Requests string
	// Queue bounds the copies in flight; default DefaultShadowQueue.
	Queue int
}

// What a shadow copies (Shadow.Requests).
const (
	ShadowReads  = "reads"
	ShadowWrites = "writes"
	ShadowAll    = "all"
)

// DefaultShadowQueue is a shadow's default Queue.
const DefaultShadowQueue = 1024

// RouteFailover is a route's failover: what Pool failed goes to Pool.
type RouteFailover struct {
	Pool string
	// On is FailoverOnError (the default) or FailoverOnErrorOrMiss.
	On string
}

// When a route fails over (RouteFailover.On).
const (
	FailoverOnError       = "error"
	FailoverOnErrorOrMiss = "error_or_miss"
)

// routeKeys is the key of a route pool (pool_route.go); every other kind
// is claimed only by pools without it.
var routeKeys = map[string]poolKey{
	"route": keyOf((*poolParser).setRoute, func(p *Pool) **Route { return &p.Route }).
		encodedAs(routeNode).omitIf(func(p *Pool) bool { return p.Route == nil }),
}

// Pools returns the pools r names, in the order the route uses them.
func (r *Route) Pools() []string {
	var names []string
	switch {
	case r.Migrate != nil:
		names = append(names, r.Migrate.From, r.Migrate.To)
	case r.WarmUp != nil:
		names = append(names, r.WarmUp.Cold, r.WarmUp.Warm)
	default:
		names = append(names, r.Pool)
	}
	if r.Shadow != nil {
		names = append(names, r.Shadow.Pool)
	}
	if r.Failover != nil {
		names = append(names, r.Failover.Pool)
	}
	return names
}

// routeReader reads one route mapping, reporting as key "route.<name>".
type routeReader struct {
	pp   *poolParser
	seen map[string]bool
}

// setRoute reads route: a mapping of migrate, warm_up, pool, shadow and
// failover.
func (pp *poolParser) setRoute(key string, v *yaml.Node) {
	rr := routeReader{pp: pp, seen: map[string]bool{}}
	r := &Route{}
	ok := rr.each(key, v, func(k string, v *yaml.Node) bool {
		switch k {
		case "migrate":
			r.Migrate = &Migrate{}
			return rr.each(key+".migrate", v, r.Migrate.set(&rr, key+".migrate"))
		case "warm_up":
			r.WarmUp = &WarmUp{}
			return rr.each(key+".warm_up", v, r.WarmUp.set(&rr, key+".warm_up"))
		case "pool":
			return rr.name(key+".pool", v, &r.Pool)
		case "shadow":
			r.Shadow = &Shadow{Fraction: 1, Requests: ShadowAll, Queue: DefaultShadowQueue}
			return rr.each(key+".shadow", v, r.Shadow.set(&rr, key+".shadow"))
		case "failover":
			r.Failover = &RouteFailover{On: FailoverOnError}
			return rr.each(key+".failover", v, r.Failover.set(&rr, key+".failover"))
		}
		pp.fail(v.Line, key, fmt.Sprintf("unknown key %q; want migrate, warm_up, pool, shadow or failover", k))
		return false
	})
	if ok && rr.whole(key, v.Line, r) {
		pp.p.Route = r
	}
}

// whole checks that r is one route: migrate, warm_up or pool, and that
// each part has what it needs.
func (rr *routeReader) whole(key string, line int, r *Route) bool {
	n := 0
	for _, b := range []bool{r.Migrate != nil, r.WarmUp != nil, r.Pool != ""} {
		if b {
			n++
		}
	}
	var msg string
	switch {
	case n != 1:
		msg = "must have exactly one of migrate, warm_up or pool"
	case r.Migrate != nil && (r.Migrate.From == "" || r.Migrate.To == "" || r.Migrate.Phase == ""):
		msg = "migrate needs from, to and phase"
	case r.Migrate != nil && r.Migrate.From == r.Migrate.To:
		msg = "migrate's from and to must be two pools"
	case r.Migrate != nil && len(r.Migrate.At) > 0 && slices.Index(phases, r.Migrate.At[0].Phase) <= slices.Index(phases, r.Migrate.Phase):
		msg = "migrate's at must name phases after its phase"
	case r.WarmUp != nil && (r.WarmUp.Cold == "" || r.WarmUp.Warm == ""):
		msg = "warm_up needs cold and warm"
	case r.Shadow != nil && r.Shadow.Pool == "":
		msg = "shadow needs pool"
	case r.Failover != nil && r.Failover.Pool == "":
		msg = "failover needs pool"
	}
	if msg != "" {
		rr.pp.fail(line, key, msg)
		return false
	}
	return true
}

// each calls f with every key and value of v, a mapping; it stops and
// returns false when f does, or when a key comes twice.
func (rr *routeReader) each(key string, v *yaml.Node, f func(k string, v *yaml.Node) bool) bool {
	if v.Kind != yaml.MappingNode {
		rr.pp.fail(v.Line, key, "must be a mapping, not "+kindName(v))
		return false
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if !rr.pp.b.plain(k, rr.pp.p.Name, key) || !rr.pp.b.plain(val, rr.pp.p.Name, key) {
			rr.pp.bad["route"] = true
			return false
		}
		if k.Kind != yaml.ScalarNode {
			rr.pp.fail(k.Line, key, "a key must be a single value, not "+kindName(k))
			return false
		}
		full := key + "." + k.Value
		if rr.seen[full] {
			rr.pp.fail(k.Line, key, fmt.Sprintf("duplicate key %q", k.Value))
			return false
		}
		rr.seen[full] = true
		if !f(k.Value, val) {
			return false
		}
	}
	return true
}

// name reads a pool's name into dst.
func (rr *routeReader) name(key string, v *yaml.Node, dst *string) bool {
	s, ok := rr.pp.scalar(key, v)
	if ok && s == "" {
		rr.pp.fail(v.Line, key, "must name a pool")
		ok = false
	}
	*dst = s
	return ok
}

// oneOf reads a value that must be one of want into dst.
func (rr *routeReader) oneOf(key string, v *yaml.Node, dst *string, want []string) bool {
	s, ok := rr.pp.scalar(key, v)
	if !ok {
		return false
	}
	if !slices.Contains(want, s) {
		rr.pp.fail(v.Line, key, fmt.Sprintf("%q is not one of %s", s, strings.Join(want, ", ")))
		return false
	}
	*dst = s
	return true
}

// unknown refuses a key a part of a route does not have.
func (rr *routeReader) unknown(key, k string, v *yaml.Node, want string) bool {
	rr.pp.fail(v.Line, key, fmt.Sprintf("unknown key %q; want %s", k, want))
	return false
}

func (m *Migrate) set(rr *routeReader, key string) func(string, *yaml.Node) bool {
	return func(k string, v *yaml.Node) bool {
		switch k {
		case "from":
			return rr.name(key+".from", v, &m.From)
		case "to":
			return rr.name(key+".to", v, &m.To)
		case "phase":
			return rr.oneOf(key+".phase", v, &m.Phase, phases)
		case "at":
			return rr.each(key+".at", v, m.setAt(rr, key+".at"))
		}
		return rr.unknown(key, k, v, "from, to, phase or at")
	}
}

// setAt reads at's entries, "phase: time", in the phases' order.
func (m *Migrate) setAt(rr *routeReader, key string) func(string, *yaml.Node) bool {
	return func(k string, v *yaml.Node) bool {
		i := slices.Index(phases, k)
		if i < 0 {
			rr.pp.fail(v.Line, key, fmt.Sprintf("%q is not one of %s", k, strings.Join(phases, ", ")))
			return false
		}
		text, ok := rr.pp.scalar(key+"."+k, v)
		if !ok {
			return false
		}
		at, err := time.Parse(time.RFC3339, text)
		if err != nil {
			rr.pp.fail(v.Line, key+"."+k, fmt.Sprintf("%q is no RFC 3339 time (2006-01-02T15:04:05Z)", text))
			return false
		}
		if n := len(m.At); n > 0 && (slices.Index(phases, m.At[n-1].Phase) >= i || !m.At[n-1].At.Before(at)) {
			rr.pp.fail(v.Line, key+"."+k, "must come after "+m.At[n-1].Phase+", later in time and in the order of the phases")
			return false
		}
		m.At = append(m.At, PhaseAt{Phase: k, At: at})
		return true
	}
}

func (w *WarmUp) set(rr *routeReader, key string) func(string, *yaml.Node) bool {
	return func(k string, v *yaml.Node) bool {
		switch k {
		case "cold":
			return rr.name(key+".cold", v, &w.Cold)
		case "warm":
			return rr.name(key+".warm", v, &w.Warm)
		}
		return rr.unknown(key, k, v, "cold or warm")
	}
}

func (s *Shadow) set(rr *routeReader, key string) func(string, *yaml.Node) bool {
	return func(k string, v *yaml.Node) bool {
		switch k {
		case "pool":
			return rr.name(key+".pool", v, &s.Pool)
		case "fraction":
			return s.setFraction(rr, key+".fraction", v)
		case "requests":
			return rr.oneOf(key+".requests", v, &s.Requests, []string{ShadowReads, ShadowWrites, ShadowAll})
		case "queue":
			n, ok := rr.pp.integer(key+".queue", v, 1, 1<<20)
			s.Queue = n
			return ok
		}
		return rr.unknown(key, k, v, "pool, fraction, requests or queue")
	}
}

// setFraction reads a fraction in (0, 1].
func (s *Shadow) setFraction(rr *routeReader, key string, v *yaml.Node) bool {
	t, ok := rr.pp.scalar(key, v)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || !(f > 0 && f <= 1) {
		rr.pp.fail(v.Line, key, fmt.Sprintf("%q is not a number in (0, 1]", t))
		return false
	}
	s.Fraction = f
	return true
}

func (f *RouteFailover) set(rr *routeReader, key string) func(string, *yaml.Node) bool {
	return func(k string, v *yaml.Node) bool {
		switch k {
		case "pool":
			return rr.name(key+".pool", v, &f.Pool)
		case "on":
			return rr.oneOf(key+".on", v, &f.On, []string{FailoverOnError, FailoverOnErrorOrMiss})
		}
		return rr.unknown(key, k, v, "pool or on")
	}
}

// checkRoutes checks that every route pool names other pools of its
// protocol that are not route pools themselves (a route of routes is
// not built).
func (b *builder) checkRoutes(pools []*Pool) {
	for _, p := range pools {
		if p.Route == nil {
			continue
		}
		line := p.Line
		for _, name := range p.Route.Pools() {
			i := slices.IndexFunc(pools, func(q *Pool) bool { return q.Name == name })
			switch {
			case name == p.Name:
				b.errs.add(line, p.Name, "route", fmt.Sprintf("pool %q cannot route to itself", name))
			case i < 0:
				b.errs.add(line, p.Name, "route", fmt.Sprintf("no pool is called %q", name))
			case pools[i].Redis != p.Redis:
				b.errs.add(line, p.Name, "route", fmt.Sprintf("pool %q speaks another protocol", name))
			case pools[i].Route != nil:
				b.errs.add(line, p.Name, "route", fmt.Sprintf("pool %q is a route pool; a route names pools with servers", name))
			}
		}
	}
}

// routeNode is how Marshal writes a route.
func routeNode(p *Pool) *yaml.Node {
	r := p.Route
	m := &yaml.Node{Kind: yaml.MappingNode}
	add := func(m *yaml.Node, k string, v *yaml.Node) { m.Content = append(m.Content, str(k), v) }
	sub := func(kv ...string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.MappingNode}
		for i := 0; i+1 < len(kv); i += 2 {
			add(n, kv[i], str(kv[i+1]))
		}
		return n
	}
	switch {
	case r.Migrate != nil:
		n := sub("from", r.Migrate.From, "to", r.Migrate.To, "phase", r.Migrate.Phase)
		if len(r.Migrate.At) > 0 {
			at := &yaml.Node{Kind: yaml.MappingNode}
			for _, a := range r.Migrate.At {
				add(at, a.Phase, str(a.At.Format(time.RFC3339Nano)))
			}
			add(n, "at", at)
		}
		add(m, "migrate", n)
	case r.WarmUp != nil:
		add(m, "warm_up", sub("cold", r.WarmUp.Cold, "warm", r.WarmUp.Warm))
	default:
		add(m, "pool", str(r.Pool))
	}
	if s := r.Shadow; s != nil {
		n := sub("pool", s.Pool, "requests", s.Requests)
		add(n, "fraction", &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatFloat(s.Fraction, 'g', -1, 64)})
		add(n, "queue", num(strconv.Itoa(s.Queue)))
		add(m, "shadow", n)
	}
	if f := r.Failover; f != nil {
		add(m, "failover", sub("pool", f.Pool, "on", f.On))
	}
	return m
}

// routedNames returns the pool names the route keys of root, the
// configuration's top mapping, name: the scalars under a pool's route
// whose key names a pool. It reads before the pools are parsed, and
// judges nothing (setRoute does).
func routedNames(root *yaml.Node) map[string]bool {
	names := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k, v := n.Content[i].Value, n.Content[i+1]; {
			case v.Kind == yaml.ScalarNode && slices.Contains([]string{"from", "to", "cold", "warm", "pool"}, k):
				names[v.Value] = true
			default:
				walk(v)
			}
		}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		p := root.Content[i+1]
		if p.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(p.Content); j += 2 {
			if p.Content[j].Value == "route" {
				walk(p.Content[j+1])
			}
		}
	}
	return names
}
