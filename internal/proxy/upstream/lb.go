package upstream

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// Load balancing: which endpoint of a cluster serves one attempt. Every
// policy picks among the cluster's healthy endpoints, or among all of them
// in panic mode (too few healthy ones), as Envoy does.

type lbPolicy int

const (
	lbRoundRobin lbPolicy = iota
	lbLeastRequest
	lbRandom
	lbRingHash
	lbMaglev
)

const (
	// Envoy's defaults.
	defaultChoiceCount    = 2
	defaultMinRingSize    = 1024
	defaultMaxRingSize    = 8 * 1024 * 1024
	defaultMaglevSize     = 65537
	defaultPanicThreshold = 50.0 // percent of healthy endpoints
)

// lbSpec is a cluster's validated load-balancing configuration.
type lbSpec struct {
	policy      lbPolicy
	choiceCount int    // LEAST_REQUEST: endpoints sampled per pick
	minRingSize uint64 // RING_HASH
	maglevSize  uint64 // MAGLEV: a prime
	// panicThreshold is common_lb_config.healthy_panic_threshold in percent:
	// below it every endpoint gets traffic; 0 disables panic mode.
	panicThreshold float64
	// SlowStart, when set, ramps up the share of endpoints added to the cluster
	// (ROUND_ROBIN and LEAST_REQUEST).
	SlowStart *SlowStartSpec
}

// UsesHash reports whether picks depend on the request's hash_policy.
func (s lbSpec) UsesHash() bool { return s.policy == lbRingHash || s.policy == lbMaglev }

func convertLB(c *clusterv3.Cluster) (lbSpec, error) {
	spec := lbSpec{
		choiceCount:    defaultChoiceCount,
		minRingSize:    defaultMinRingSize,
		maglevSize:     defaultMaglevSize,
		panicThreshold: defaultPanicThreshold,
	}
	switch p := c.GetLbPolicy(); p {
	case clusterv3.Cluster_ROUND_ROBIN:
		spec.policy = lbRoundRobin
	case clusterv3.Cluster_LEAST_REQUEST:
		spec.policy = lbLeastRequest
	case clusterv3.Cluster_RANDOM:
		spec.policy = lbRandom
	case clusterv3.Cluster_RING_HASH:
		spec.policy = lbRingHash
	case clusterv3.Cluster_MAGLEV:
		spec.policy = lbMaglev
	default:
		return spec, fmt.Errorf("lb_policy %v is not supported (ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV)", p)
	}
	if err := spec.setPolicyConfig(c); err != nil {
		return spec, err
	}
	if err := spec.setCommonConfig(c.GetCommonLbConfig()); err != nil {
		return spec, fmt.Errorf("common_lb_config: %w", err)
	}
	return spec, nil
}

// setPolicyConfig applies the lb_config that goes with the policy; a config
// for another policy is refused rather than silently ignored.
func (s *lbSpec) setPolicyConfig(c *clusterv3.Cluster) error {
	switch cfg := c.GetLbConfig().(type) {
	case nil:
		return nil
	case *clusterv3.Cluster_LeastRequestLbConfig_:
		lr := cfg.LeastRequestLbConfig
		if s.policy != lbLeastRequest {
			return errors.New("least_request_lb_config needs lb_policy LEAST_REQUEST")
		}
		if err := xdsconv.Unsupported(
			xdsconv.Set("least_request_lb_config.active_request_bias", lr.GetActiveRequestBias() != nil),
		); err != nil {
			return err
		}
		var err error
		if s.SlowStart, err = convertSlowStart(lr.GetSlowStartConfig()); err != nil {
			return fmt.Errorf("least_request_lb_config: %w", err)
		}
		if cc := lr.GetChoiceCount(); cc != nil {
			s.choiceCount = int(cc.GetValue())
		}
	case *clusterv3.Cluster_RoundRobinLbConfig_:
		if s.policy != lbRoundRobin {
			return errors.New("round_robin_lb_config needs lb_policy ROUND_ROBIN")
		}
		var err error
		if s.SlowStart, err = convertSlowStart(cfg.RoundRobinLbConfig.GetSlowStartConfig()); err != nil {
			return fmt.Errorf("round_robin_lb_config: %w", err)
		}
	case *clusterv3.Cluster_RingHashLbConfig_:
		rh := cfg.RingHashLbConfig
		if s.policy != lbRingHash {
			return errors.New("ring_hash_lb_config needs lb_policy RING_HASH")
		}
		if err := xdsconv.Unsupported(
			xdsconv.Set("ring_hash_lb_config.hash_function "+rh.GetHashFunction().String(), rh.GetHashFunction() != clusterv3.Cluster_RingHashLbConfig_XX_HASH),
			xdsconv.Set("ring_hash_lb_config.maximum_ring_size", rh.GetMaximumRingSize() != nil),
		); err != nil {
			return err
		}
		if m := rh.GetMinimumRingSize(); m != nil {
			if m.GetValue() == 0 {
				return errors.New("ring_hash_lb_config.minimum_ring_size must be positive")
			}
			s.minRingSize = m.GetValue()
		}
	case *clusterv3.Cluster_MaglevLbConfig_:
		if s.policy != lbMaglev {
			return errors.New("maglev_lb_config needs lb_policy MAGLEV")
		}
		if ts := cfg.MaglevLbConfig.GetTableSize(); ts != nil {
			if !isPrime(ts.GetValue()) {
				return fmt.Errorf("maglev_lb_config.table_size %d is not a prime number", ts.GetValue())
			}
			s.maglevSize = ts.GetValue()
		}
	default:
		return fmt.Errorf("lb_config %T is not supported", cfg)
	}
	return nil
}

func (s *lbSpec) setCommonConfig(cc *clusterv3.Cluster_CommonLbConfig) error {
	if err := xdsconv.Unsupported(
		xdsconv.Set("locality config (zone_aware_lb_config / locality_weighted_lb_config)", cc.GetLocalityConfigSpecifier() != nil),
		xdsconv.Set("update_merge_window", cc.GetUpdateMergeWindow() != nil),
		xdsconv.Set("ignore_new_hosts_until_first_hc", cc.GetIgnoreNewHostsUntilFirstHc()),
		xdsconv.Set("close_connections_on_host_set_change", cc.GetCloseConnectionsOnHostSetChange()),
		xdsconv.Set("consistent_hashing_lb_config", cc.GetConsistentHashingLbConfig() != nil),
		xdsconv.Set("override_host_status", cc.GetOverrideHostStatus() != nil),
	); err != nil {
		return err
	}
	if t := cc.GetHealthyPanicThreshold(); t != nil {
		// Envoy rounds the percentage to an integer.
		s.panicThreshold = math.Round(t.GetValue())
	}
	return nil
}

func isPrime(n uint64) bool {
	if n < 2 {
		return false
	}
	for d := uint64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// ClusterState is what a cluster keeps across configuration swaps, so that
// frequent updates neither reset round robin to the first endpoint, nor
// forget in-flight requests, health or hash tables.
type ClusterState struct {
	rr     atomic.Uint64
	Served atomic.Bool // the cluster has received traffic (health checks leave no_traffic_interval)
	// breakers count what the circuit breakers limit.
	breakers breakerState

	// active counts in-flight requests per endpoint (LEAST_REQUEST). Only
	// the ADS goroutine touches the map; snapshots hold the counters.
	active map[string]*atomic.Int64
	// Health is the active health checking state; nil without health_checks.
	// Owned by the ADS goroutine like active, as are outlier and transport.
	Health *HealthState
	// Outlier is the outlier detection state; nil without outlier_detection.
	Outlier *outlierState
	// Transport is the cluster's own transport; nil when it uses the shared one.
	transport *clusterTransport

	hashTable atomic.Pointer[cachedHashTable]

	// added is when each endpoint joined the cluster (AddedTimes); ADS goroutine only.
	added map[string]time.Time

	// stats are the Service port stats that the applied configuration's
	// cluster holds (see HoldStats); ADS goroutine only.
	stats *Stats
}

func NewClusterState() *ClusterState {
	return &ClusterState{active: make(map[string]*atomic.Int64)}
}

// ActiveCounters returns the in-flight counters of endpoints, creating the
// missing ones.
func (cs *ClusterState) ActiveCounters(endpoints []string) []*atomic.Int64 {
	out := make([]*atomic.Int64, len(endpoints))
	for i, ep := range endpoints {
		c, ok := cs.active[ep]
		if !ok {
			c = new(atomic.Int64)
			cs.active[ep] = c
		}
		out[i] = c
	}
	return out
}

// PruneActive drops the counters of endpoints no longer in the cluster; old
// snapshots still hold theirs until their requests finish. held are those EDS
// still lists as unhealthy (see pruneAdded).
func (cs *ClusterState) PruneActive(endpoints, held []string) {
	keep := make(map[string]bool, len(endpoints))
	for _, ep := range endpoints {
		keep[ep] = true
	}
	for ep := range cs.active {
		if !keep[ep] {
			delete(cs.active, ep)
		}
	}
	cs.pruneAdded(keep, held)
}

// PickContext is what a pick knows about the request.
type PickContext struct {
	Hash    uint64
	HasHash bool // false: hash-based policies pick at random, as Envoy does
}

// HostSet is the set of endpoints picks choose from at one health
// generation, as indexes into Cluster.Endpoints.
type HostSet struct {
	gen uint64
	Idx []int
	// since is when each endpoint's slow start window began, by index into
	// Cluster.Endpoints; nil without slow start (then Cluster.Added is used).
	since []time.Time
	once  sync.Once
	table hashTable // RING_HASH / MAGLEV, built on first use
}

// Pick returns the index of the endpoint for one attempt; false when no
// endpoint can be picked (503 "no healthy upstream").
func (c *Cluster) Pick(pc PickContext) (int, bool) {
	hs := c.currentHosts()
	n := len(hs.Idx)
	if n == 0 {
		return 0, false
	}
	switch c.LB.policy {
	case lbLeastRequest:
		if c.LB.SlowStart != nil && c.Added != nil {
			return c.leastRequestSlowly(hs), true
		}
		return c.leastRequest(hs.Idx), true
	case lbRandom:
		return hs.Idx[rand.IntN(n)], true
	case lbRingHash, lbMaglev:
		h := pc.Hash
		if !pc.HasHash {
			h = rand.Uint64()
		}
		return hs.Idx[c.hashTableOf(hs).lookup(h)], true
	}
	if c.LB.SlowStart != nil && c.Added != nil {
		return c.pickSlowly(hs), true
	}
	i := c.State.rr.Add(1) - 1
	return hs.Idx[i%uint64(n)], true
}

// currentHosts returns the host set for the current health state. Without
// health checks and outlier detection it never changes; with them it is
// rebuilt when their generation moves (a transition, an ejection or its end, a
// membership change).
func (c *Cluster) currentHosts() *HostSet {
	if c.Health == nil && c.Outlier == nil {
		return c.AllHosts
	}
	// Both generations only grow, so their sum moves whenever either does.
	var gen uint64
	if c.Health != nil {
		gen = c.Health.gen.Load()
	}
	if c.Outlier != nil {
		gen += c.Outlier.gen.Load()
	}
	if hs := c.hosts.Load(); hs != nil && hs.gen == gen {
		return hs
	}
	// Concurrent rebuilds compute the same set; the last store wins.
	hs := &HostSet{gen: gen, Idx: c.selectHosts(), since: c.slowStartSince()}
	c.hosts.Store(hs)
	return hs
}

// selectHosts returns the healthy endpoints (passing their health checks and
// not ejected by outlier detection), or all of them in panic mode: when the
// healthy share is below the panic threshold, Envoy spreads the traffic over
// every endpoint rather than overload the few healthy ones.
func (c *Cluster) selectHosts() []int {
	healthy := make([]int, 0, len(c.Endpoints))
	for i, ep := range c.Endpoints {
		if (c.Health == nil || c.Health.Healthy(ep)) && (c.Outlier == nil || !c.OutlierHosts[i].Ejected.Load()) {
			healthy = append(healthy, i)
		}
	}
	total := len(c.Endpoints)
	if total > 0 && c.LB.panicThreshold > 0 && 100*float64(len(healthy))/float64(total) < c.LB.panicThreshold {
		return AllIndexes(total)
	}
	return healthy
}

func AllIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// leastRequest is Envoy's power of choices: sample choiceCount endpoints
// (with replacement) and take the one with the fewest active requests.
func (c *Cluster) leastRequest(idx []int) int {
	best := -1
	var bestActive int64
	for range c.LB.choiceCount {
		i := idx[rand.IntN(len(idx))]
		if a := c.Active[i].Load(); best < 0 || a < bestActive {
			best, bestActive = i, a
		}
	}
	return best
}

// leastRequestSlowly is leastRequest with the endpoints' slow start weights:
// the load compared is active requests (plus one) over the weight factor.
func (c *Cluster) leastRequestSlowly(hs *HostSet) int {
	now, since := time.Now(), hs.sinceOr(c.Added)
	best, bestLoad := -1, 0.0
	for range c.LB.choiceCount {
		i := hs.Idx[rand.IntN(len(hs.Idx))]
		load := float64(c.Active[i].Load()+1) / c.LB.SlowStart.factor(since[i], now)
		if best < 0 || load < bestLoad {
			best, bestLoad = i, load
		}
	}
	return best
}

// hashTableOf returns the ring or Maglev table of a host set, shared with
// earlier snapshots whose host set was the same.
func (c *Cluster) hashTableOf(hs *HostSet) hashTable {
	hs.once.Do(func() {
		hosts := make([]string, len(hs.Idx))
		for i, j := range hs.Idx {
			hosts[i] = c.Endpoints[j]
		}
		hs.table = c.State.hashTableFor(c.LB, hosts)
	})
	return hs.table
}

type cachedHashTable struct {
	key   string
	table hashTable
}

// hashTableFor builds (or reuses) the table for hosts: configuration swaps
// that leave a cluster's hosts alone do not pay for a rebuild.
func (cs *ClusterState) hashTableFor(spec lbSpec, hosts []string) hashTable {
	key := fmt.Sprintf("%d/%d/%d|%s", spec.policy, spec.minRingSize, spec.maglevSize, strings.Join(hosts, ","))
	if cached := cs.hashTable.Load(); cached != nil && cached.key == key {
		return cached.table
	}
	var t hashTable
	if spec.policy == lbMaglev {
		t = newMaglevTable(hosts, spec.maglevSize)
	} else {
		t = newHashRing(hosts, spec.minRingSize)
	}
	cs.hashTable.Store(&cachedHashTable{key: key, table: t})
	return t
}

// StopAll stops the cluster's health checker and outlier detection timer
// and closes its idle connections.
func (cs *ClusterState) StopAll() {
	if cs.Health != nil {
		cs.Health.Stop()
	}
	if cs.Outlier != nil {
		cs.Outlier.Stop()
	}
	if cs.transport != nil {
		cs.transport.closeIdleConnections()
	}
}
