package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Outlier detection (passive health checking) with Envoy's semantics and
// split_external_local_origin_errors false: every attempt's result counts, a
// connect failure, a reset, a per-try timeout or the route timeout counting as
// a 5xx (Envoy maps them to 503 and 504).
//
//   - consecutive_5xx: an endpoint whose result is a 5xx that many times in a
//     row is ejected at once (enforcing_consecutive_5xx percent of the time).
//   - success rate: every interval, if at least success_rate_minimum_hosts
//     endpoints had success_rate_request_volume results in the last interval,
//     those whose success rate is below mean - stdev_factor/1000 * stdev are
//     ejected (enforcing_success_rate percent of the time).
//   - An ejection lasts base_ejection_time times the endpoint's ejection
//     multiplier, at most max_ejection_time (default 300s, or
//     base_ejection_time if larger). The multiplier grows by one per ejection
//     and shrinks by one per interval the endpoint spends not ejected.
//     Ejections end on the interval timer, as Envoy's do.
//   - At most max_ejection_percent (default 10) of the cluster's endpoints are
//     ejected at once, except that one endpoint may always be (Envoy's
//     always_eject_one_host, which the embedded proxy always applies).
//   - An ejected endpoint is unhealthy: load balancers skip it unless the
//     cluster is in panic mode. A successful active health check ends its
//     ejection (successful_active_health_check_uneject_host, default true).

// Envoy's outlier detection defaults.
const (
	defaultOutlierConsecutive5xx = 5
	defaultOutlierInterval       = 10 * time.Second
	defaultBaseEjectionTime      = 30 * time.Second
	defaultMaxEjectionTime       = 300 * time.Second
	defaultMaxEjectionPercent    = 10
	defaultEnforcing5xx          = 100
	defaultEnforcingSuccessRate  = 100
	defaultSRMinimumHosts        = 5
	defaultSRRequestVolume       = 100
	defaultSRStdevFactor         = 1900
)

// outlierSpec is a validated OutlierDetection; comparable.
type outlierSpec struct {
	consecutive5xx       uint32 // 0 disables the detector
	enforcing5xx         uint32 // percent
	interval             time.Duration
	baseEjection         time.Duration
	maxEjection          time.Duration
	maxEjectionPercent   uint32
	enforcingSuccessRate uint32 // percent
	srMinimumHosts       uint32
	srRequestVolume      uint32
	srStdevFactor        uint32 // thousandths
	unejectOnHealthCheck bool
}

func convertOutlierDetection(od *clusterv3.OutlierDetection) (*outlierSpec, error) {
	if od == nil {
		return nil, nil
	}
	u32 := func(v *wrapperspb.UInt32Value, def uint32) uint32 {
		if v == nil {
			return def
		}
		return v.GetValue()
	}
	// A field set to its default value behaves as Envoy does; other values of
	// the detectors the proxy does not implement are refused.
	isNot := func(v *wrapperspb.UInt32Value, def uint32) bool { return v != nil && v.GetValue() != def }
	nonZero := func(d *durationpb.Duration) bool { return d != nil && d.AsDuration() != 0 }
	if err := xdsconv.Unsupported(
		xdsconv.Set("consecutive_gateway_failure", isNot(od.GetConsecutiveGatewayFailure(), 5)),
		xdsconv.Set("enforcing_consecutive_gateway_failure", isNot(od.GetEnforcingConsecutiveGatewayFailure(), 0)),
		xdsconv.Set("split_external_local_origin_errors", od.GetSplitExternalLocalOriginErrors()),
		xdsconv.Set("consecutive_local_origin_failure", isNot(od.GetConsecutiveLocalOriginFailure(), 5)),
		xdsconv.Set("enforcing_consecutive_local_origin_failure", isNot(od.GetEnforcingConsecutiveLocalOriginFailure(), 100)),
		xdsconv.Set("enforcing_local_origin_success_rate", isNot(od.GetEnforcingLocalOriginSuccessRate(), 100)),
		xdsconv.Set("failure_percentage_threshold", isNot(od.GetFailurePercentageThreshold(), 85)),
		xdsconv.Set("enforcing_failure_percentage", isNot(od.GetEnforcingFailurePercentage(), 0)),
		xdsconv.Set("enforcing_failure_percentage_local_origin", isNot(od.GetEnforcingFailurePercentageLocalOrigin(), 0)),
		xdsconv.Set("failure_percentage_minimum_hosts", isNot(od.GetFailurePercentageMinimumHosts(), 5)),
		xdsconv.Set("failure_percentage_request_volume", isNot(od.GetFailurePercentageRequestVolume(), 50)),
		xdsconv.Set("max_ejection_time_jitter", nonZero(od.GetMaxEjectionTimeJitter())),
		xdsconv.Set("monitors", len(od.GetMonitors()) > 0),
		xdsconv.Set("always_eject_one_host false (the embedded proxy always may eject one endpoint)",
			od.GetAlwaysEjectOneHost() != nil && !od.GetAlwaysEjectOneHost().GetValue()),
		xdsconv.Set("detect_degraded_hosts", od.GetDetectDegradedHosts().GetValue()),
	); err != nil {
		return nil, err
	}
	s := &outlierSpec{
		consecutive5xx:       u32(od.GetConsecutive_5Xx(), defaultOutlierConsecutive5xx),
		enforcing5xx:         min(u32(od.GetEnforcingConsecutive_5Xx(), defaultEnforcing5xx), 100),
		interval:             defaultOutlierInterval,
		baseEjection:         defaultBaseEjectionTime,
		maxEjectionPercent:   min(u32(od.GetMaxEjectionPercent(), defaultMaxEjectionPercent), 100),
		enforcingSuccessRate: min(u32(od.GetEnforcingSuccessRate(), defaultEnforcingSuccessRate), 100),
		srMinimumHosts:       u32(od.GetSuccessRateMinimumHosts(), defaultSRMinimumHosts),
		srRequestVolume:      u32(od.GetSuccessRateRequestVolume(), defaultSRRequestVolume),
		srStdevFactor:        u32(od.GetSuccessRateStdevFactor(), defaultSRStdevFactor),
		unejectOnHealthCheck: od.GetSuccessfulActiveHealthCheckUnejectHost() == nil || od.GetSuccessfulActiveHealthCheckUnejectHost().GetValue(),
	}
	if d := od.GetInterval(); d != nil {
		s.interval = d.AsDuration()
	}
	if d := od.GetBaseEjectionTime(); d != nil {
		s.baseEjection = d.AsDuration()
	}
	if s.interval <= 0 || s.baseEjection <= 0 {
		return nil, errors.New("interval and base_ejection_time must be positive")
	}
	s.maxEjection = max(defaultMaxEjectionTime, s.baseEjection)
	if d := od.GetMaxEjectionTime(); d != nil {
		s.maxEjection = d.AsDuration()
		if s.maxEjection < s.baseEjection {
			// As Envoy refuses it.
			return nil, errors.New("max_ejection_time cannot be smaller than base_ejection_time")
		}
	}
	return s, nil
}

// outlierHost is the outlier state of one endpoint, kept across
// configuration swaps while the endpoint stays in the cluster.
type outlierHost struct {
	endpoint    string
	consecutive atomic.Uint32 // 5xx results in a row
	Ejected     atomic.Bool
	// This interval's results, for the success rate.
	total, success atomic.Uint64

	// Guarded by outlierState.mu.
	member     bool // in the applied configuration
	ejectedAt  time.Time
	multiplier uint32 // Envoy's ejection time back-off
}

// outlierState is the outlier detection of one cluster, in its ClusterState.
type outlierState struct {
	cluster string
	log     *slog.Logger
	running *sync.WaitGroup

	spec atomic.Pointer[outlierSpec]
	// gen moves with every ejection and its end, so that load balancers
	// rebuild their host sets.
	gen atomic.Uint64

	mu      sync.Mutex
	hosts   map[string]*outlierHost // every endpoint seen since the last apply
	members []*outlierHost          // the applied configuration's endpoints
	active  int                     // ejected members
	cancel  context.CancelFunc      // stops the interval timer; nil until started
	stopped bool
	// share is the cluster's part of its Service port's ejected-endpoints
	// gauge; nil until configured and once stopped.
	share *gaugeShare
}

// NewOutlierState starts the state of a cluster's outlier detection;
// running counts its interval timers, for shutdown to wait for.
func NewOutlierState(cluster string, log *slog.Logger, running *sync.WaitGroup) *outlierState {
	return &outlierState{
		cluster: cluster,
		log:     log,
		running: running,
		hosts:   make(map[string]*outlierHost),
	}
}

// HostsFor returns the states of endpoints, creating the missing ones.
// Called by the ADS goroutine while compiling.
func (o *outlierState) HostsFor(endpoints []string) []*outlierHost {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*outlierHost, len(endpoints))
	for i, ep := range endpoints {
		h, ok := o.hosts[ep]
		if !ok {
			h = &outlierHost{endpoint: ep}
			o.hosts[ep] = h
		}
		out[i] = h
	}
	return out
}

// Configure applies the cluster of the snapshot being applied: its spec and
// endpoints (removed ones forget their state, as in Envoy), and starts the
// interval timer. Called by the ADS goroutine only.
func (o *outlierState) Configure(spec *outlierSpec, endpoints []string, hosts []*outlierHost, stats *Stats) {
	o.spec.Store(spec)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.share == nil || o.share.stats != stats {
		o.share.leave()
		o.share = stats.ejectedShare()
	}
	keep := make(map[string]bool, len(endpoints))
	for _, ep := range endpoints {
		keep[ep] = true
	}
	changed := false
	for ep, h := range o.hosts {
		if !keep[ep] {
			if h.member && h.Ejected.Load() {
				h.Ejected.Store(false)
				changed = true
			}
			h.member = false
			delete(o.hosts, ep)
		}
	}
	o.members = o.members[:0]
	o.active = 0
	for _, h := range hosts {
		h.member = true
		o.members = append(o.members, h)
		if h.Ejected.Load() {
			o.active++
		}
	}
	if changed {
		o.gen.Add(1)
	}
	o.reportEjected()
	if o.cancel == nil && !o.stopped {
		ctx, cancel := context.WithCancel(context.Background())
		o.cancel = cancel
		o.running.Add(1)
		go o.run(ctx)
	}
}

// Stop ends the interval timer (the cluster or its outlier detection went
// away, or the proxy stops) and deletes the cluster's ejection gauge.
func (o *outlierState) Stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cancel != nil {
		o.cancel()
	}
	o.stopped = true
	o.share.leave()
	o.share = nil
}

// run is the interval timer: it ends ejections whose time is up and
// applies the success rate detector.
func (o *outlierState) run(ctx context.Context) {
	defer o.running.Done()
	for {
		timer := time.NewTimer(o.spec.Load().interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		o.sweep(time.Now())
	}
}

// sweep is one interval's work, as in Envoy's DetectorImpl::onIntervalTimer.
func (o *outlierState) sweep(now time.Time) {
	spec := o.spec.Load()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	for _, h := range o.members {
		if !h.Ejected.Load() {
			// Time spent healthy shortens the next ejection.
			if h.multiplier > 0 {
				h.multiplier--
			}
			continue
		}
		if now.Sub(h.ejectedAt) >= min(spec.baseEjection*time.Duration(h.multiplier), spec.maxEjection) {
			o.uneject(h, "ejection time elapsed")
		}
	}
	o.successRate(spec)
}

// successRate ejects the endpoints whose success rate in the last interval
// is an outlier (Envoy's success rate detector). Called with mu held.
func (o *outlierState) successRate(spec *outlierSpec) {
	type sample struct {
		h    *outlierHost
		rate float64
	}
	var valid []sample
	sum := 0.0
	for _, h := range o.members {
		total, success := h.total.Swap(0), h.success.Swap(0)
		if h.Ejected.Load() || total == 0 || total < uint64(spec.srRequestVolume) {
			continue
		}
		rate := 100 * float64(success) / float64(total)
		valid = append(valid, sample{h, rate})
		sum += rate
	}
	if len(valid) == 0 || len(valid) < int(spec.srMinimumHosts) {
		return
	}
	mean := sum / float64(len(valid))
	variance := 0.0
	for _, s := range valid {
		variance += (s.rate - mean) * (s.rate - mean)
	}
	stdev := math.Sqrt(variance / float64(len(valid)))
	threshold := mean - float64(spec.srStdevFactor)/1000*stdev
	for _, s := range valid {
		if s.rate < threshold {
			o.eject(s.h, spec, spec.enforcingSuccessRate, fmt.Sprintf("success rate %.1f%% below %.1f%%", s.rate, threshold))
		}
	}
}

// Observe records the result of an attempt at an endpoint: a 5xx response,
// a connection or protocol failure and a timeout are failures; an aborted
// request is one only when the route timeout ended it (routeTimedOut), a
// client going away is no result. It is the request path's only cost of
// outlier detection.
func (o *outlierState) Observe(h *outlierHost, out Outcome, status int, routeTimedOut bool) {
	failed := true
	switch out {
	case OutcomeResponse:
		failed = status >= 500
	case OutcomeAborted:
		if !routeTimedOut {
			return
		}
	}
	o.Record(h, failed)
}

// Record counts one result; the consecutive_5xx detector ejects at once.
func (o *outlierState) Record(h *outlierHost, failed bool) {
	h.total.Add(1)
	if !failed {
		h.success.Add(1)
		if h.consecutive.Load() != 0 {
			h.consecutive.Store(0)
		}
		return
	}
	spec := o.spec.Load()
	if spec.consecutive5xx == 0 {
		return
	}
	if h.consecutive.Add(1) == spec.consecutive5xx {
		o.mu.Lock()
		defer o.mu.Unlock()
		if !h.member || h.Ejected.Load() || o.stopped {
			return
		}
		// The counter restarts whether or not the endpoint is ejected.
		h.consecutive.Store(0)
		o.eject(h, spec, spec.enforcing5xx, fmt.Sprintf("%d consecutive 5xx", spec.consecutive5xx))
	}
}

// eject ejects an endpoint unless max_ejection_percent forbids it or the
// enforcing percentage says no. Called with mu held.
func (o *outlierState) eject(h *outlierHost, spec *outlierSpec, enforcing uint32, reason string) {
	total := len(o.members)
	// Envoy's rule (with always_eject_one_host): the ejected share after this
	// ejection stays within max_ejection_percent, or nothing is ejected yet.
	if o.active > 0 && 100*float64(o.active+1)/float64(total) > float64(spec.maxEjectionPercent) {
		o.log.Debug("outlier ejection refused: max_ejection_percent reached", "cluster", o.cluster, "endpoint", h.endpoint, "reason", reason)
		return
	}
	if enforcing < 100 && uint32(rand.IntN(100)) >= enforcing {
		return
	}
	h.Ejected.Store(true)
	h.ejectedAt = time.Now()
	// Envoy stops growing the multiplier once it reaches max_ejection_time.
	if time.Duration(h.multiplier)*spec.baseEjection < spec.maxEjection+spec.baseEjection {
		h.multiplier++
	}
	o.active++
	o.gen.Add(1)
	if o.share != nil {
		o.share.stats.ejection()
	}
	o.reportEjected()
	o.log.Info("outlier ejection", "cluster", o.cluster, "endpoint", h.endpoint, "reason", reason,
		"duration", min(spec.baseEjection*time.Duration(h.multiplier), spec.maxEjection).String())
}

// uneject returns an ejected endpoint to service. Called with mu held.
func (o *outlierState) uneject(h *outlierHost, reason string) {
	h.Ejected.Store(false)
	h.consecutive.Store(0)
	o.active--
	o.gen.Add(1)
	o.reportEjected()
	o.log.Info("outlier ejection ended", "cluster", o.cluster, "endpoint", h.endpoint, "reason", reason)
}

// healthCheckPassed ends an endpoint's ejection when an active health check
// succeeds (successful_active_health_check_uneject_host).
func (o *outlierState) healthCheckPassed(endpoint string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h, ok := o.hosts[endpoint]; ok && h.member && h.Ejected.Load() && !o.stopped && o.spec.Load().unejectOnHealthCheck {
		o.uneject(h, "active health check passed")
	}
}

// reportEjected updates the ejected-endpoints gauge. Called with mu held.
func (o *outlierState) reportEjected() {
	if !o.stopped && o.share != nil {
		o.share.set(float64(o.active))
	}
}

// Outcome is how an attempt ended, as far as retrying is concerned.
type Outcome int

const (
	OutcomeResponse       Outcome = iota // response headers arrived
	OutcomeConnectFailure                // no connection to the endpoint
	OutcomeReset                         // the connection failed before the response headers
	OutcomePerTryTimeout                 // the attempt's per_try_timeout expired
	OutcomeAborted                       // the request itself ended (route/idle timeout, client gone)
)
