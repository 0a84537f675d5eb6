package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// Active health checking of cluster endpoints, with Envoy's semantics:
// a new endpoint starts unhealthy and is checked at once, one success makes
// it healthy the first time; afterwards healthy_threshold consecutive
// successes are needed. An HTTP check's answer outside expected_statuses
// (200 only by default) ejects an endpoint at once unless its status is in
// retriable_statuses; those, timeouts and connection errors must repeat
// unhealthy_threshold times. A TCP check without send/receive only connects.
// Checks of a cluster with upstream TLS go over TLS (its SNI and
// verification, no ALPN, as Envoy without tls_options).

// defaultNoTrafficInterval is Envoy's no_traffic_interval default.
const defaultNoTrafficInterval = 60 * time.Second

// maxHealthCheckBody bounds how much of a check's response body is read
// (to keep the connection reusable).
const maxHealthCheckBody = 64 << 10

type healthCheckKind int

const (
	hcHTTP         healthCheckKind = iota
	healthCheckTCP                 // tcp_health_check without send/receive: connect only
)

// HealthCheckSpec is a validated HealthCheck with an http_health_check or a
// connect-only tcp_health_check.
type HealthCheckSpec struct {
	kind               healthCheckKind
	Timeout            time.Duration
	Interval           time.Duration
	noTrafficInterval  time.Duration // used until the cluster has had traffic
	UnhealthyThreshold uint32
	HealthyThreshold   uint32
	Path               string
	Host               string // Host header of the checks
	ReuseConnection    bool
	Expected           StatusSet // healthy statuses (expected_statuses, 200 by default)
	Retriable          StatusSet // statuses that count towards unhealthy_threshold
}

// StatusSet is a set of HTTP statuses in [100, 600), comparable so that a
// spec can be compared as a whole.
type StatusSet [10]uint64

func (s *StatusSet) Add(code int) { s[code/64] |= 1 << (code % 64) }

func (s *StatusSet) has(code int) bool {
	return code >= 0 && code < 640 && s[code/64]&(1<<(code%64)) != 0
}

// addRanges adds Int64Ranges: half-open, within [100, 600), as Envoy requires.
func (s *StatusSet) addRanges(field string, ranges []*typev3.Int64Range) error {
	for _, r := range ranges {
		if r.GetStart() < 100 || r.GetEnd() > 600 || r.GetStart() >= r.GetEnd() {
			return fmt.Errorf("%s range [%d, %d) is not within [100, 600)", field, r.GetStart(), r.GetEnd())
		}
		for code := r.GetStart(); code < r.GetEnd(); code++ {
			s.Add(int(code))
		}
	}
	return nil
}

func convertHealthChecks(cluster string, hcs []*corev3.HealthCheck) (*HealthCheckSpec, error) {
	switch len(hcs) {
	case 0:
		return nil, nil
	case 1:
		return convertHealthCheck(cluster, hcs[0])
	}
	return nil, fmt.Errorf("only one health check is supported, got %d", len(hcs))
}

func convertHealthCheck(cluster string, hc *corev3.HealthCheck) (*HealthCheckSpec, error) {
	// name only names statistics, and the always_log flags only matter with
	// an event log (which is refused): both are safe to accept.
	if err := xdsconv.Unsupported(
		xdsconv.Set("initial_jitter", hc.GetInitialJitter() != nil),
		xdsconv.Set("interval_jitter", hc.GetIntervalJitter() != nil),
		xdsconv.Set("interval_jitter_percent", hc.GetIntervalJitterPercent() != 0),
		xdsconv.Set("alt_port", hc.GetAltPort() != nil),
		xdsconv.Set("no_traffic_healthy_interval", hc.GetNoTrafficHealthyInterval() != nil),
		xdsconv.Set("unhealthy_interval", hc.GetUnhealthyInterval() != nil),
		xdsconv.Set("unhealthy_edge_interval", hc.GetUnhealthyEdgeInterval() != nil),
		xdsconv.Set("healthy_edge_interval", hc.GetHealthyEdgeInterval() != nil),
		xdsconv.Set("event_log_path", hc.GetEventLogPath() != ""),
		xdsconv.Set("event_logger", len(hc.GetEventLogger()) > 0),
		xdsconv.Set("event_service", hc.GetEventService() != nil),
		xdsconv.Set("tls_options", hc.GetTlsOptions() != nil),
		xdsconv.Set("transport_socket_match_criteria", hc.GetTransportSocketMatchCriteria() != nil),
	); err != nil {
		return nil, err
	}
	spec := &HealthCheckSpec{
		Timeout:            hc.GetTimeout().AsDuration(),
		Interval:           hc.GetInterval().AsDuration(),
		noTrafficInterval:  defaultNoTrafficInterval,
		UnhealthyThreshold: hc.GetUnhealthyThreshold().GetValue(),
		HealthyThreshold:   hc.GetHealthyThreshold().GetValue(),
		ReuseConnection:    hc.GetReuseConnection() == nil || hc.GetReuseConnection().GetValue(),
	}
	if d := hc.GetNoTrafficInterval(); d != nil {
		spec.noTrafficInterval = d.AsDuration()
	}
	if spec.Timeout <= 0 || spec.Interval <= 0 || spec.noTrafficInterval <= 0 {
		return nil, errors.New("timeout, interval and no_traffic_interval must be positive")
	}
	if spec.UnhealthyThreshold == 0 || spec.HealthyThreshold == 0 {
		return nil, errors.New("unhealthy_threshold and healthy_threshold must be positive")
	}
	switch h := hc.GetHealthChecker().(type) {
	case *corev3.HealthCheck_HttpHealthCheck_:
		if err := spec.setHTTP(cluster, h.HttpHealthCheck); err != nil {
			return nil, fmt.Errorf("http_health_check: %w", err)
		}
	case *corev3.HealthCheck_TcpHealthCheck_:
		t := h.TcpHealthCheck
		if err := xdsconv.Unsupported(
			xdsconv.Set("tcp_health_check.send", t.GetSend() != nil),
			xdsconv.Set("tcp_health_check.receive", len(t.GetReceive()) > 0),
			xdsconv.Set("tcp_health_check.proxy_protocol_config", t.GetProxyProtocolConfig() != nil),
		); err != nil {
			return nil, err
		}
		spec.kind = healthCheckTCP
	default:
		return nil, fmt.Errorf("health checker %T is not supported (only http_health_check and a connect-only tcp_health_check)", hc.GetHealthChecker())
	}
	return spec, nil
}

func (s *HealthCheckSpec) setHTTP(cluster string, h *corev3.HealthCheck_HttpHealthCheck) error {
	if err := xdsconv.Unsupported(
		xdsconv.Set("send", h.GetSend() != nil),
		xdsconv.Set("receive", len(h.GetReceive()) > 0),
		xdsconv.Set("response_buffer_size", h.GetResponseBufferSize() != nil),
		xdsconv.Set("request_headers_to_add", len(h.GetRequestHeadersToAdd()) > 0),
		xdsconv.Set("request_headers_to_remove", len(h.GetRequestHeadersToRemove()) > 0),
		xdsconv.Set("codec_client_type "+h.GetCodecClientType().String()+" (only HTTP1)", h.GetCodecClientType() != typev3.CodecClientType_HTTP1),
		xdsconv.Set("use_alpn_protocol", h.GetUseAlpnProtocol()),
		xdsconv.Set("service_name_matcher", h.GetServiceNameMatcher() != nil),
		xdsconv.Set("method "+h.GetMethod().String()+" (only GET)", h.GetMethod() != corev3.RequestMethod_METHOD_UNSPECIFIED && h.GetMethod() != corev3.RequestMethod_GET),
	); err != nil {
		return err
	}
	s.Path = h.GetPath()
	if !strings.HasPrefix(s.Path, "/") {
		return fmt.Errorf("path %q must start with /", s.Path)
	}
	if err := s.Retriable.addRanges("retriable_statuses", h.GetRetriableStatuses()); err != nil {
		return err
	}
	if len(h.GetExpectedStatuses()) == 0 {
		s.Expected.Add(http.StatusOK)
	} else if err := s.Expected.addRanges("expected_statuses", h.GetExpectedStatuses()); err != nil {
		return err
	}
	// Envoy's default Host is the cluster's name.
	s.Host = h.GetHost()
	if s.Host == "" {
		s.Host = cluster
	}
	return nil
}

// HealthState is the active health checking of one cluster: one checker
// goroutine per endpoint, and the endpoints' health, which survives
// configuration swaps.
type HealthState struct {
	cluster string
	log     *slog.Logger
	served  *atomic.Bool // the cluster has had traffic: checks leave no_traffic_interval
	// checkers counts the proxy's running checker goroutines; running is
	// waited for at shutdown.
	checkers *atomic.Int64
	running  *sync.WaitGroup

	// gen moves on every transition and membership change, so that load
	// balancers rebuild their host sets.
	gen    atomic.Uint64
	Config atomic.Pointer[checkConfig]
	// Outlier is the cluster's outlier detection, whose ejections a
	// successful check ends; nil without it.
	Outlier atomic.Pointer[outlierState]

	mu        sync.RWMutex
	endpoints map[string]*endpointHealth
	stopped   bool
	// share is the cluster's part of its Service port's healthy-endpoints
	// gauge; nil once stopped.
	share *gaugeShare
}

type endpointHealth struct {
	Healthy atomic.Bool
	// passed is when (unix nanoseconds) a check last made the endpoint
	// healthy (its first pass, or passing again after failing): slow start
	// (re)starts its window there, as at Envoy's last health check pass time.
	// Zero until then.
	passed atomic.Int64
	cancel context.CancelFunc
	addr   string // where it is checked: the endpoint, or its health_check_config port
}

// checkConfig is what a check needs; replaced as a whole when the cluster's
// configuration changes, so a checker never sees half of an update.
type checkConfig struct {
	spec      HealthCheckSpec
	dialer    EndpointDialer
	tls       *upstreamTLSSpec // the cluster's, nil for clear text
	tlsKey    string
	scheme    string
	Transport *http.Transport
	client    *http.Client
}

// NewHealthState starts the health state of a cluster, whose checks run
// while served is set; checkers counts the running checkers, running is
// waited for at shutdown.
func NewHealthState(cluster string, served *atomic.Bool, log *slog.Logger, checkers *atomic.Int64, running *sync.WaitGroup) *HealthState {
	return &HealthState{
		cluster:   cluster,
		log:       log,
		served:    served,
		checkers:  checkers,
		running:   running,
		endpoints: make(map[string]*endpointHealth),
	}
}

// Healthy reports whether an endpoint passes its health checks. Unknown
// endpoints (not checked yet) are not.
func (hs *HealthState) Healthy(endpoint string) bool {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	eh, ok := hs.endpoints[endpoint]
	return ok && eh.Healthy.Load()
}

// passedAt is when a check last made an endpoint healthy (see
// endpointHealth.passed); the zero time when none has or it is unknown.
func (hs *HealthState) passedAt(endpoint string) time.Time {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	eh, ok := hs.endpoints[endpoint]
	if !ok {
		return time.Time{}
	}
	if ns := eh.passed.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Configure applies a cluster of the snapshot being applied: new endpoints
// start unhealthy with a checker each, removed ones stop being checked.
// Called by the ADS goroutine only.
func (hs *HealthState) Configure(uc *Cluster) {
	hs.SetConfig(uc)
	want := make(map[string]string, len(uc.Endpoints))
	for _, ep := range uc.Endpoints {
		want[ep] = ep
		if a, ok := uc.HealthAddrs[ep]; ok {
			want[ep] = a
		}
	}
	hs.mu.Lock()
	changed := false
	if hs.share == nil || hs.share.stats != uc.Stats {
		// First configured, or the cluster's series moved to another Service port.
		hs.share.leave()
		hs.share = uc.Stats.healthyShare()
		changed = true
	}
	for ep, eh := range hs.endpoints {
		if addr, ok := want[ep]; !ok || addr != eh.addr {
			eh.cancel()
			delete(hs.endpoints, ep)
			changed = true
		}
	}
	for ep, addr := range want {
		if _, ok := hs.endpoints[ep]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		eh := &endpointHealth{cancel: cancel, addr: addr}
		hs.endpoints[ep] = eh
		hs.running.Add(1)
		hs.checkers.Add(1)
		go hs.run(ctx, ep, eh)
		changed = true
	}
	hs.mu.Unlock()
	if changed {
		hs.gen.Add(1)
		hs.reportHealthy()
	}
}

// SetConfig replaces the check configuration if the cluster's changed.
func (hs *HealthState) SetConfig(uc *Cluster) {
	tlsKey := ""
	var hcTLS *upstreamTLSSpec
	if uc.TLS != nil {
		// Envoy's checks use the cluster's transport socket without ALPN
		// (HealthCheck.tls_options, refused, would set it).
		tlsKey = uc.TLS.key
		c := *uc.TLS
		c.config = uc.TLS.config.Clone()
		c.config.NextProtos = nil
		hcTLS = &c
	}
	cur := hs.Config.Load()
	if cur != nil && cur.spec == *uc.HealthCheck && cur.dialer == uc.Dialer && cur.tlsKey == tlsKey {
		return
	}
	d := uc.Dialer
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return d.Dial(ctx, addr)
		},
		DisableKeepAlives:   !uc.HealthCheck.ReuseConnection,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		Protocols:           protocols,
	}
	scheme := "http"
	if hcTLS != nil {
		scheme = "https"
		tr.DialTLSContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
			return DialTLS(ctx, d, addr, hcTLS, false)
		}
	}
	hs.Config.Store(&checkConfig{
		spec:      *uc.HealthCheck,
		dialer:    d,
		tls:       hcTLS,
		tlsKey:    tlsKey,
		scheme:    scheme,
		Transport: tr,
		client:    &http.Client{Transport: tr, CheckRedirect: noRedirects},
	})
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Stop ends every checker of the cluster (its health checks were removed,
// or the cluster was).
func (hs *HealthState) Stop() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for ep, eh := range hs.endpoints {
		eh.cancel()
		delete(hs.endpoints, ep)
	}
	hs.stopped = true
	hs.gen.Add(1)
	hs.share.leave()
	hs.share = nil
}

// run checks one endpoint until ctx is cancelled: at once, then every
// interval (no_traffic_interval while the cluster has had no traffic).
func (hs *HealthState) run(ctx context.Context, endpoint string, eh *endpointHealth) {
	defer hs.running.Done()
	defer hs.checkers.Add(-1)
	var used *checkConfig
	defer func() { used.Transport.CloseIdleConnections() }()
	counters := checkCounters{fresh: true}
	for {
		cfg := hs.Config.Load()
		if used != nil && used != cfg {
			used.Transport.CloseIdleConnections() // the configuration changed
		}
		used = cfg
		res := cfg.Check(ctx, eh.addr)
		if ctx.Err() != nil {
			return
		}
		hs.Record(endpoint, eh, &counters, res, &cfg.spec)
		wait := cfg.spec.Interval
		if !hs.served.Load() {
			wait = cfg.spec.noTrafficInterval
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// CheckResult is the outcome of one check.
type CheckResult struct {
	OK bool
	// Immediate failures (an unexpected status) eject at once; others
	// (timeouts, connection errors, retriable statuses) count towards
	// unhealthy_threshold.
	Immediate bool
	Reason    string
}

// Check runs one health check.
func (cfg *checkConfig) Check(ctx context.Context, endpoint string) CheckResult {
	ctx, cancel := context.WithTimeout(ctx, cfg.spec.Timeout)
	defer cancel()
	if cfg.spec.kind == healthCheckTCP {
		return cfg.checkConnect(ctx, endpoint)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.scheme+"://"+endpoint+cfg.spec.Path, nil)
	if err != nil {
		return CheckResult{Immediate: true, Reason: err.Error()}
	}
	req.Host = cfg.spec.Host
	req.Header.Set("User-Agent", "Envoy/HC")
	res, err := cfg.client.Do(req)
	if err == nil {
		_, err = io.CopyN(io.Discard, res.Body, maxHealthCheckBody)
		if err == io.EOF {
			err = nil
		}
		res.Body.Close()
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return CheckResult{Reason: "timeout"}
	case err != nil:
		return CheckResult{Reason: "connection error: " + err.Error()}
	case !cfg.spec.Expected.has(res.StatusCode):
		return CheckResult{Immediate: !cfg.spec.Retriable.has(res.StatusCode), Reason: fmt.Sprintf("status %d", res.StatusCode)}
	}
	return CheckResult{OK: true, Reason: fmt.Sprintf("status %d", res.StatusCode)}
}

// checkConnect is a connect-only TCP check: the endpoint is healthy when a
// connection (and, for a TLS cluster, its handshake) succeeds within the
// timeout. Each check opens and closes its own connection.
func (cfg *checkConfig) checkConnect(ctx context.Context, endpoint string) CheckResult {
	var conn net.Conn
	var err error
	if cfg.tls != nil {
		conn, err = DialTLS(ctx, cfg.dialer, endpoint, cfg.tls, false)
	} else {
		conn, err = cfg.dialer.Dial(ctx, endpoint)
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		if conn != nil {
			_ = conn.Close()
		}
		return CheckResult{Reason: "timeout"}
	case err != nil:
		return CheckResult{Reason: "connection error: " + err.Error()}
	}
	_ = conn.Close()
	return CheckResult{OK: true, Reason: "connected"}
}

// checkCounters are a checker's consecutive results.
type checkCounters struct {
	successes, failures uint32
	fresh               bool // no result recorded yet
}

// Record applies a check result to an endpoint's health.
func (hs *HealthState) Record(endpoint string, eh *endpointHealth, c *checkCounters, res CheckResult, spec *HealthCheckSpec) {
	first := c.fresh
	c.fresh = false
	healthy := eh.Healthy.Load()
	if res.OK {
		if o := hs.Outlier.Load(); o != nil {
			o.healthCheckPassed(endpoint)
		}
		c.failures = 0
		if healthy {
			return
		}
		c.successes++
		if first || c.successes >= spec.HealthyThreshold {
			c.successes = 0
			eh.passed.Store(time.Now().UnixNano())
			hs.transition(endpoint, eh, true, res.Reason)
		}
		return
	}
	c.successes = 0
	if !healthy {
		return
	}
	c.failures++
	if res.Immediate || c.failures >= spec.UnhealthyThreshold {
		c.failures = 0
		hs.transition(endpoint, eh, false, res.Reason)
	}
}

func (hs *HealthState) transition(endpoint string, eh *endpointHealth, healthy bool, reason string) {
	eh.Healthy.Store(healthy)
	hs.gen.Add(1)
	hs.log.Info("health check transition", "cluster", hs.cluster, "endpoint", endpoint, "healthy", healthy, "reason", reason)
	hs.reportHealthy()
}

// reportHealthy updates the healthy-endpoints gauge. The lock orders
// concurrent reports, and keeps a stopped cluster out of the gauge.
func (hs *HealthState) reportHealthy() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.stopped || hs.share == nil {
		return
	}
	n := 0
	for _, eh := range hs.endpoints {
		if eh.Healthy.Load() {
			n++
		}
	}
	hs.share.set(float64(n))
}
