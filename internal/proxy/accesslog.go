package proxy

import (
	"context"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// accessLogQueue is how many access log lines may wait for a slow log sink
// before further lines are dropped (and counted): about a second of traffic
// at a few thousand requests per second, and a few MB at most.
const accessLogQueue = 8192

// accessLogFlushTimeout bounds how long shutdown waits for the queued lines
// to be written; a sink that is stuck for longer loses them.
const accessLogFlushTimeout = 5 * time.Second

// accessEntry is what an access log line says about one request. Requests
// queue it; formatting and writing happen on the access log's goroutine.
type accessEntry struct {
	ctx          context.Context
	time         time.Time
	listener     string
	method       string
	authority    string
	url          *url.URL // the downstream request's, never modified after the request
	proto        string
	status       int
	elapsed      time.Duration
	bytes        int64
	cluster      string
	service      string // the cluster's Service port, as upstreamKey.String
	upstreamHost string
	attempts     int
	requestID    string
	vhost        string
	route        string // the route and path labels
	routePath    string
	routeName    string // the xDS route's name: "" when none matched
	remoteAddr   string
	upstreamErr  error
	details      string
	// conn is set, and the fields above but time, elapsed, listener,
	// cluster, service, upstreamHost, remoteAddr and upstreamErr unused,
	// for a TCP proxy connection's line.
	conn *connEntry
}

// connEntry is what an access log line says of a TCP proxy connection
// beyond the fields it shares with requests' lines.
type connEntry struct {
	start      time.Time
	serverName string // the client's SNI
	statPrefix string
	tls        string // "passthrough" or "terminated"
	// received and sent are the bytes received from the client and sent to
	// it (Envoy's %BYTES_RECEIVED% and %BYTES_SENT%).
	received, sent int64
	termination    string // how the connection ended (tcpEnd*)
	downstreamErr  error  // the TLS handshake's failure
}

// accessLog writes access log lines off the request path, as Envoy's access
// loggers do: a request hands its line to a bounded queue and never waits for
// the log sink. When the queue is full (the sink is slower than the
// traffic), lines are dropped and counted in
// portico_proxy_access_log_dropped_total rather than slowing requests down.
type accessLog struct {
	log     *slog.Logger
	batcher LogBatcher // nil: a write per line
	dropped prometheus.Counter
	queue   chan accessEntry
	done    chan struct{} // closed when the writer has drained the queue

	mu      sync.RWMutex // write-held only to stop
	started bool
	stopped bool
}

func newAccessLog(log *slog.Logger, batcher LogBatcher, dropped prometheus.Counter, capacity int) *accessLog {
	return &accessLog{log: log, batcher: batcher, dropped: dropped, queue: make(chan accessEntry, capacity), done: make(chan struct{})}
}

// enabled reports whether access log lines would be written at all.
func (a *accessLog) enabled(ctx context.Context) bool {
	return a.log.Enabled(ctx, slog.LevelInfo)
}

// start starts the writer.
func (a *accessLog) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.stopped {
		return
	}
	a.started = true
	go a.run()
}

func (a *accessLog) run() {
	defer close(a.done)
	for e := range a.queue {
		if a.batcher == nil {
			a.write(&e)
			continue
		}
		a.batcher.Hold()
		a.write(&e)
		a.writeQueued()
		a.batcher.Release()
	}
}

// writeQueued writes the lines queued now, returning when the queue is
// empty: the batch they make is written without waiting for more traffic.
func (a *accessLog) writeQueued() {
	for {
		select {
		case e, ok := <-a.queue:
			if !ok {
				return
			}
			a.write(&e)
		default:
			return
		}
	}
}

// add queues a line; after stop (a request that outlived the shutdown's
// drain) it is written at once.
func (a *accessLog) add(e *accessEntry) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.stopped {
		a.write(e)
		return
	}
	select {
	case a.queue <- *e:
	default:
		a.dropped.Inc()
	}
}

// stop writes the queued lines (waiting at most accessLogFlushTimeout for
// the sink) and makes later lines synchronous.
func (a *accessLog) stop() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	a.stopped = true
	close(a.queue)
	started := a.started
	a.mu.Unlock()
	if !started {
		a.run()
		return
	}
	select {
	case <-a.done:
	case <-time.After(accessLogFlushTimeout):
	}
}

// write formats and writes one line.
func (a *accessLog) write(e *accessEntry) {
	if e.conn != nil {
		a.writeConn(e)
		return
	}
	r := slog.NewRecord(e.time, slog.LevelInfo, "access", 0)
	r.AddAttrs(
		slog.String("listener", e.listener),
		slog.String("method", e.method),
		slog.String("authority", e.authority),
		slog.String("path", e.url.RequestURI()),
		slog.String("proto", e.proto),
		slog.Int("status", e.status),
		slog.Float64("duration_ms", float64(e.elapsed.Microseconds())/1000),
		slog.Int64("bytes", e.bytes),
		slog.String("upstream_cluster", e.cluster),
		slog.String("upstream_service", e.service),
		slog.String("upstream_host", e.upstreamHost),
		slog.Int("attempts", e.attempts),
		slog.String("request_id", e.requestID),
		slog.String("vhost", e.vhost),
		slog.String("route", e.route),
		slog.String("route_path", e.routePath),
		slog.String("route_name", e.routeName),
		slog.String("downstream_remote_address", e.remoteAddr),
	)
	if e.upstreamErr != nil {
		r.AddAttrs(slog.String("upstream_error", e.upstreamErr.Error()))
	}
	if e.details != "" {
		r.AddAttrs(slog.String("response_code_details", e.details))
	}
	_ = a.log.Handler().Handle(e.ctx, r)
}

// writeConn writes a TCP proxy connection's line: the request line's
// attributes where they mean the same, with proto "tcp".
func (a *accessLog) writeConn(e *accessEntry) {
	c := e.conn
	r := slog.NewRecord(e.time, slog.LevelInfo, "access", 0)
	r.AddAttrs(
		slog.String("listener", e.listener),
		slog.String("proto", "tcp"),
		slog.String("server_name", c.serverName),
		slog.String("tls", c.tls),
		slog.String("stat_prefix", c.statPrefix),
		slog.Time("start_time", c.start),
		slog.Float64("duration_ms", float64(e.elapsed.Microseconds())/1000),
		slog.Int64("bytes_received", c.received),
		slog.Int64("bytes_sent", c.sent),
		slog.String("upstream_cluster", e.cluster),
		slog.String("upstream_service", e.service),
		slog.String("upstream_host", e.upstreamHost),
		slog.String("downstream_remote_address", e.remoteAddr),
		slog.String("termination", c.termination),
	)
	if e.upstreamErr != nil {
		r.AddAttrs(slog.String("upstream_error", e.upstreamErr.Error()))
	}
	if c.downstreamErr != nil {
		r.AddAttrs(slog.String("downstream_error", c.downstreamErr.Error()))
	}
	_ = a.log.Handler().Handle(e.ctx, r)
}
