// Package stats holds what the embedded proxy's metrics share: the lifecycle
// of a label set's series (Group: each series created by the first event it
// counts, none created again once the label set is retired and its series
// deleted), the code_class label, and the making and registering of the
// portico_proxy_* collectors. The route series (package proxy) and the
// Service port series (package upstream) are built on it. It is a leaf.
package stats

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// CodeClasses are the values of the code_class label.
var CodeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// CodeClass returns the index in CodeClasses of a status code; anything
// outside 100-599 counts as 5xx.
func CodeClass(status int) int {
	if c := status/100 - 1; c >= 0 && c < len(CodeClasses) {
		return c
	}
	return len(CodeClasses) - 1
}

// Group guards the series of one label set, each created by the first
// event it counts. Once retired (the label set left the configuration and
// its series were deleted) it creates none again, so that a request still
// running on an old configuration cannot bring deleted series back.
type Group struct {
	mu      sync.Mutex
	retired bool
}

// Get returns *p, creating it with create, unless g is retired: then
// discard, which nothing exports. The request path calls it only when *p is
// not there yet (a load of p first), so that it never locks once a series
// exists.
func Get[T any](g *Group, p *atomic.Pointer[T], create func() T, discard T) T {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v := p.Load(); v != nil {
		return *v
	}
	if g.retired {
		return discard
	}
	v := create()
	p.Store(&v)
	return v
}

// Retire stops creation and calls remove, under the lock, to delete what
// was created.
func (g *Group) Retire(remove func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.retired {
		g.retired = true
		remove()
	}
}

// Series that nothing exports, for requests of routes and clusters that
// left the configuration while they ran.
var (
	DiscardedCounter prometheus.Counter = prometheus.NewCounter(prometheus.CounterOpts{Name: "discarded"})
	DiscardedGauge   prometheus.Gauge   = prometheus.NewGauge(prometheus.GaugeOpts{Name: "discarded"})
)

// Register registers c, reusing an identical collector that is already
// registered (e.g. a second Proxy sharing one registry).
func Register[C prometheus.Collector](reg prometheus.Registerer, c C, log *slog.Logger) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	log.Warn("cannot register proxy metrics", "error", err)
	return c
}

// CounterVec and GaugeVec make the proxy's collectors, named
// portico_proxy_<name>.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "portico", Subsystem: "proxy", Name: name, Help: help}, labels)
}

func GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "portico", Subsystem: "proxy", Name: name, Help: help}, labels)
}

// WithClass is labels and code_class.
func WithClass(labels []string) []string {
	return append(append([]string(nil), labels...), "code_class")
}

// Locked runs f with g's lock held, telling it whether g is retired: for
// state kept beside the series (a shared gauge) that must change together
// with their creation and deletion.
func (g *Group) Locked(f func(retired bool)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g.retired)
}
