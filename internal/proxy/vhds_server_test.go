package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// porticoServer is Portico's own xDS server (the one `portico run` serves the
// embedded proxy with, VHDS included) on a fixed address, which can be stopped
// (every stream ends: the proxy reconnects) and served again, by the same
// Server or a new one (a controller restart).
type porticoServer struct {
	t    *testing.T
	addr string
	s    *server.Server
	stop func()
}

func startPorticoServer(t *testing.T, s *server.Server) *porticoServer {
	t.Helper()
	ps := &porticoServer{t: t, s: s}
	ps.serve("127.0.0.1:0")
	t.Cleanup(func() { ps.stop() })
	return ps
}

// serve serves ps.s on addr, retrying while the previous socket lingers.
func (ps *porticoServer) serve(addr string) {
	ps.t.Helper()
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		ps.t.Fatal(err)
	}
	ps.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ps.s.Serve(ctx, ln)
	}()
	ps.stop = func() { cancel(); <-done }
}

// restart ends every stream, then serves s (ps's own Server, or a new one) on
// the same address.
func (ps *porticoServer) restart(s *server.Server) {
	ps.t.Helper()
	ps.stop()
	ps.s = s
	ps.serve(ps.addr)
}

// vhdsModel is a plain-HTTP configuration as the translator publishes it: the
// hosts of ingress_http sorted by name, each one a new message when it changes
// and the same pointer otherwise; every host routes to one of the clusters A,
// B and C.
type vhdsModel struct {
	base  resources         // the clusters and their endpoints
	addrs map[string]string // the backends' addresses
	// own are the hosts routed to a cluster of their own (to the backend
	// of their route), published with them: a host's change can then add
	// and remove clusters, which come in responses of their own.
	own       map[string]string
	hosts     map[string]*routev3.VirtualHost
	backend   map[string]string
	level     string // a header the route configuration adds ("": none)
	withdrawn bool   // no plain-HTTP listener, no ingress_http
	gone      map[string]bool
	// bad are the hosts the proxy refuses (a CORS policy): the responses
	// that carry them are NACKed, until they are fixed.
	bad map[string]bool
}

// setBad makes host one the proxy refuses.
func (m *vhdsModel) setBad(host string) {
	vh := vhost(host, routeTo("A", "to-A"))
	vh.Cors = &routev3.CorsPolicy{}
	m.hosts[host] = vh
	delete(m.backend, host)
	delete(m.gone, host)
	delete(m.own, host)
	m.bad[host] = true
}

// newVHDSModel returns a model of five hosts, routed at random to A, B and C.
func newVHDSModel(t *testing.T, rng *rand.Rand) *vhdsModel {
	base, bs := threeBackends(t)
	m := &vhdsModel{base: base, addrs: map[string]string{}, own: map[string]string{}, hosts: map[string]*routev3.VirtualHost{},
		backend: map[string]string{}, gone: map[string]bool{}, bad: map[string]bool{}}
	for n, b := range bs {
		m.addrs[n] = b.addr()
	}
	for i := range 5 {
		m.set(fmt.Sprintf("h%d.test", i), []string{"A", "B", "C"}[rng.IntN(3)])
	}
	return m
}

func (m *vhdsModel) set(host, backend string) {
	m.hosts[host] = vhost(host, routeTo(backend, "to-"+backend))
	m.backend[host] = backend
	delete(m.own, host)
	delete(m.gone, host)
	delete(m.bad, host)
}

func (m *vhdsModel) remove(host string) {
	delete(m.hosts, host)
	delete(m.backend, host)
	delete(m.bad, host)
	delete(m.own, host)
	m.gone[host] = true
}

// setOwn routes host to a new cluster of its own, to backend.
func (m *vhdsModel) setOwn(host, backend string, n int) {
	m.set(host, backend)
	cluster := fmt.Sprintf("%s-%d", host, n)
	m.hosts[host] = vhost(host, routeTo(cluster, "to-"+backend))
	m.own[host] = cluster
}

func (m *vhdsModel) resources(t testing.TB) *translate.Resources {
	res := &translate.Resources{}
	for _, c := range m.base.clusters {
		res.Clusters = append(res.Clusters, c)
	}
	for _, e := range m.base.endpoints {
		res.Endpoints = append(res.Endpoints, e)
	}
	for _, host := range slices.Sorted(maps.Keys(m.own)) {
		res.Clusters = append(res.Clusters, edsCluster(m.own[host]))
		res.Endpoints = append(res.Endpoints, assignment(m.own[host], m.addrs[m.backend[host]]))
	}
	if m.withdrawn {
		return res
	}
	rc := routeConfig(translate.RouteHTTP)
	if m.level != "" {
		rc.RequestHeadersToAdd = headersToAdd("x-level", m.level)
	}
	for _, h := range slices.Sorted(maps.Keys(m.hosts)) {
		rc.VirtualHosts = append(rc.VirtualHosts, m.hosts[h])
	}
	res.Listeners = []types.Resource{httpListener(t)}
	res.Routes = []types.Resource{rc}
	return res
}

// mismatch returns how the proxy's configuration in force differs from m,
// "" when it does not.
func (m *vhdsModel) mismatch(p *testProxy) string {
	snap := p.current.Load()
	if snap == nil {
		return "no configuration applied"
	}
	l := snap.listeners["ingress_http"]
	if m.withdrawn {
		if l != nil {
			return "ingress_http still in force"
		}
		return ""
	}
	if l == nil {
		return "no ingress_http"
	}
	t := l.Chains[""].Routes
	for _, host := range slices.Sorted(maps.Keys(m.backend)) {
		vh := t.SelectVirtualHost(host)
		if vh == nil {
			return fmt.Sprintf("%s: not routed, want %s", host, m.backend[host])
		}
		want := m.backend[host]
		if c, ok := m.own[host]; ok {
			want = c
		}
		if got := vh.Routes[0].Forward.Clusters[0].Name; got != want {
			return fmt.Sprintf("%s: routed to %s, want %s", host, got, want)
		}
	}
	for host := range m.gone {
		if vh := t.SelectVirtualHost(host); vh != nil {
			return fmt.Sprintf("%s: removed, still routed to %s", host, vh.Routes[0].Forward.Clusters[0].Name)
		}
	}
	return ""
}

// answers returns how real requests through p differ from what m routes,
// "" when they do not: the backend, and the header the route configuration adds.
func (m *vhdsModel) answers(t *testing.T, c *http.Client, p *testProxy) string {
	for _, host := range slices.Sorted(maps.Keys(m.backend)) {
		r := get(t, c, p.httpURL(t, "/x"), host, nil)
		if r.Backend != m.backend[host] {
			return fmt.Sprintf("%s answered by %q (status %d), want %s", host, r.Backend, r.Status, m.backend[host])
		}
		if got := r.Echo.Header.Get("X-Level"); got != m.level {
			return fmt.Sprintf("%s: x-level %q, want %q", host, got, m.level)
		}
	}
	return ""
}

// TestVHDSWithPorticoServer drives the embedded proxy from Portico's own xDS
// server through random sequences of hosts added, changed, removed and
// re-added, the route configuration changed, withdrawn and brought back,
// publishes in quick succession, streams broken (the proxy reconnects with the
// versions it holds) and the server replaced by a new one (a controller
// restart): after each, the proxy must come to route every host as published,
// and real requests must reach the backend the host routes to.
func TestVHDSWithPorticoServer(t *testing.T) {
	for seed := range uint64(vhdsSeeds()) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			byIdentity := seed%2 == 0
			bad := seed%3 != 0
			newServer := func() *server.Server {
				s := server.New(slog.New(slog.DiscardHandler), nil)
				if byIdentity {
					s.VersionByIdentity()
				}
				return s
			}
			m := newVHDSModel(t, rng)
			ps := startPorticoServer(t, newServer())
			publish := func() {
				t.Helper()
				if _, err := ps.s.Publish(context.Background(), m.resources(t)); err != nil {
					t.Fatal(err)
				}
			}
			publish()
			p := startProxy(t, &controlPlane{t: t, addr: ps.addr})
			c := noRedirectClient()
			var log []string
			nacks := func() []map[string]any {
				return p.logs.records("NACK: rejected xDS response; previous resources stay in force")
			}
			nacked := 0
			converge := func(step int) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for {
					diff := m.mismatch(p)
					if diff == "" && !m.withdrawn {
						diff = m.answers(t, c, p)
					}
					if diff == "" {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s\nafter step %d the proxy does not come to the configuration published: %s", strings.Join(log, "\n"), step, diff)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			for step := range 60 {
				did, madeBad := m.edit(rng, step, bad)
				switch n := rng.IntN(100); {
				case n < 8:
					ps.restart(ps.s)
					did = append(did, "streams broken")
				case n < 14:
					ps.restart(newServer())
					did = append(did, "server replaced")
				}
				publish()
				log = append(log, fmt.Sprintf("step %d: %q", step, did))
				if madeBad && !m.withdrawn {
					waitFor(t, "a NACK", func() bool { return len(nacks()) > nacked })
					nacked = len(nacks())
				}
				if rng.IntN(4) == 0 || len(m.bad) > 0 {
					continue // the next publish comes at once, or the proxy refuses it
				}
				converge(step)
			}
			for host := range m.bad {
				m.remove(host)
			}
			m.withdrawn = false
			publish()
			log = append(log, "final: every bad host removed, ingress_http present")
			converge(-1)
			p.stop()
			m.checkAtRest(t, p)
			t.Logf("%d NACKs", len(nacks()))
		})
	}
}

// vhdsSeeds is how many random sequences TestVHDSWithPorticoServer plays:
// VHDS_SEEDS, or 4.
func vhdsSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("VHDS_SEEDS")); err == nil {
		return n
	}
	return 4
}

// edit makes random changes to m, those of step, and says what they were and
// whether a host became one the proxy refuses (only when bad), and still is.
func (m *vhdsModel) edit(rng *rand.Rand, step int, bad bool) (did []string, madeBad bool) {
	var newBad []string
	backends := []string{"A", "B", "C"}
	switch n := rng.IntN(100); {
	case n < 8 && !m.withdrawn:
		m.withdrawn = true
		did = append(did, "withdraw ingress_http")
	case n < 16 && m.withdrawn:
		m.withdrawn = false
		did = append(did, "bring ingress_http back")
	case n < 24:
		m.level = fmt.Sprint("level", step)
		did = append(did, "level "+m.level)
	}
	for range rng.IntN(4) {
		host := fmt.Sprintf("h%d.test", rng.IntN(12))
		if len(m.bad) > 0 && rng.IntN(2) == 0 {
			host = slices.Sorted(maps.Keys(m.bad))[0]
		}
		switch _, ok := m.hosts[host]; {
		case ok && rng.IntN(3) == 0:
			m.remove(host)
			did = append(did, "remove "+host)
		case bad && !m.bad[host] && rng.IntN(6) == 0:
			m.setBad(host)
			did = append(did, "bad "+host)
			newBad = append(newBad, host)
		default:
			b := backends[rng.IntN(3)]
			if rng.IntN(3) == 0 {
				m.setOwn(host, b, step)
				did = append(did, "set "+host+" own cluster to "+b)
			} else {
				m.set(host, b)
				did = append(did, "set "+host+" "+b)
			}
		}
	}
	return did, slices.ContainsFunc(newBad, func(h string) bool { return m.bad[h] })
}

// checkAtRest checks that what p, stopped, keeps follows m: nothing is left
// of the hosts and clusters gone.
func (m *vhdsModel) checkAtRest(t *testing.T, p *testProxy) {
	t.Helper()
	if got, want := len(p.routeStats), 1+2*len(m.hosts); got != want {
		t.Errorf("%d route stats kept for %d hosts, want %d", got, len(m.hosts), want)
	}
	used := map[string]bool{}
	for host, b := range m.backend {
		if c, ok := m.own[host]; ok {
			b = c
		}
		used[b] = true
	}
	if got, want := len(p.clusterStates), len(used); got != want {
		t.Errorf("%d cluster states kept, want %d", got, want)
	}
	if got, want := len(p.store.vhosts[translate.RouteHTTP]), len(m.hosts); got != want {
		t.Errorf("%d VirtualHosts stored, want %d", got, want)
	}
	if tb := httpTable(p); len(tb.Vhosts) != len(m.hosts) || tb.Slots > 20 {
		t.Errorf("table of %d virtual hosts in %d slots, want %d hosts", len(tb.Vhosts), tb.Slots, len(m.hosts))
	}
}
