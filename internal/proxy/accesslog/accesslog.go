// Package accesslog writes the embedded proxy's access log lines (requests
// and TCP proxy connections) off the request path: a bounded queue, one writer
// goroutine, lines dropped and counted rather than slowing requests down.
// It is a leaf: the request path (package hcm) and TCP proxying (package
// listener) fill an Entry and hand it to Log.Add; config.go checks an
// access_log configuration (Check) for both.
package accesslog

import (
	"context"
	"log/slog"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Queue is how many access log lines may wait for a slow log sink
// before further lines are dropped (and counted): about a second of traffic
// at a few thousand requests per second, and a few MB at most.
const Queue = 8192

// FlushDelay is how long the first line of a batch may wait for more
// before the batch is written (as nginx's access_log flush= and Envoy's file
// flush interval, which default to a second): under load a write carries many
// lines instead of the few queued while the writer was last scheduled, and
// the writer's goroutine wakes once per batch, not per line.
const FlushDelay = 100 * time.Millisecond

// BatchLines is how many lines make a batch that is written without waiting
// for FlushDelay to end, about logbatch.MaxBatch bytes of them. It also bounds
// the work the writer does before it lets requests run: on a proxy with one
// core, formatting 100 ms of traffic's lines at once held requests up for
// milliseconds (c32's p99 went from 3.2 to 10.5 ms with unbounded batches).
const BatchLines = 256

// accessLogFlushTimeout bounds how long shutdown waits for the queued lines
// to be written; a sink that is stuck for longer loses them.
const accessLogFlushTimeout = 5 * time.Second

// Entry is what an access log line says about one request. Requests
// queue it; formatting and writing happen on the access log's goroutine.
type Entry struct {
	Ctx          context.Context
	Time         time.Time
	Listener     string
	Method       string
	Authority    string
	URL          url.URL // the downstream request's, copied: a codec reuses its own
	Proto        string
	Status       int
	Elapsed      time.Duration
	Bytes        int64
	Cluster      string
	Service      string // the cluster's Service port, as upstreamKey.String
	UpstreamHost string
	Attempts     int
	RequestID    string
	Routed       *Route // nil: no virtual host matched
	RemoteAddr   string
	UpstreamErr  error
	Details      string
	// Conn is set, and the fields above but time, elapsed, listener,
	// cluster, service, upstreamHost, remoteAddr and upstreamErr unused,
	// for a TCP proxy connection's line.
	Conn *ConnEntry
}

// ConnEntry is what an access log line says of a TCP proxy connection
// beyond the fields it shares with requests' lines.
type ConnEntry struct {
	Start      time.Time
	ServerName string // the client's SNI
	StatPrefix string
	TLS        string // "passthrough" or "terminated"
	// Received and Sent are the bytes received from the client and sent to
	// it (Envoy's %BYTES_RECEIVED% and %BYTES_SENT%).
	Received, Sent int64
	Termination    string // how the connection ended (tcpEnd*)
	DownstreamErr  error  // the TLS handshake's failure
}

// Log writes access log lines off the request path, as Envoy's access
// loggers do: a request hands its line to a bounded queue and never waits for
// the log sink. When the queue is full (the sink is slower than the
// traffic), lines are dropped and counted in
// portico_proxy_access_log_dropped_total rather than slowing requests down.
type Log struct {
	log     *slog.Logger
	direct  *directHandler // log's handler when the access log writes its lines itself (NewLogger); else nil
	line    lineWriter     // the writer goroutine's buffer for direct lines
	batcher Batcher        // nil: a write per line
	dropped prometheus.Counter
	// unmatched is the Route of the lines of requests that matched no
	// virtual host (Entry.Routed nil), formatted once like the others.
	unmatched *Route
	queue     chan Entry
	done      chan struct{} // closed when the writer has drained the queue
	// wake tells the writer a batch has begun (the first line queued since
	// its last write: waiting is set) or that a batch is ready (batchLines).
	wake    chan struct{}
	waiting atomic.Bool
	delay   time.Duration // FlushDelay; 0 (a sink that cannot batch): none

	mu      sync.RWMutex // write-held only to stop
	started bool
	stopped bool
}

func New(log *slog.Logger, batcher Batcher, dropped prometheus.Counter, capacity int) *Log {
	a := &Log{log: log, batcher: batcher, dropped: dropped, queue: make(chan Entry, capacity), done: make(chan struct{}),
		wake: make(chan struct{}, 1), unmatched: NewVhostRoute(Unmatched)}
	if batcher != nil {
		a.delay = FlushDelay
	}
	if d, ok := log.Handler().(*directHandler); ok {
		a.direct = d
		a.line.json, a.line.attrs, a.line.invalidUTF8 = d.json, d.attrs, d.invalidUTF8
	}
	return a
}

// Enabled reports whether access log lines would be written at all.
func (a *Log) Enabled(ctx context.Context) bool {
	return a.log.Enabled(ctx, slog.LevelInfo)
}

// Start starts the writer.
func (a *Log) Start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.stopped {
		return
	}
	a.started = true
	go a.run()
}

func (a *Log) run() {
	defer close(a.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for open := true; open; {
		if _, open = <-a.wake; !open {
			break // stopped: what is queued is written below
		}
		if a.delay > 0 && len(a.queue) < a.batchLines() {
			timer.Reset(a.delay)
			select {
			case _, open = <-a.wake: // a batch is ready, or stopped
				timer.Stop()
			case <-timer.C:
			}
		}
		// From here a line queued starts a new batch: it wakes the writer
		// again, and at worst finds its line already written.
		a.waiting.Store(false)
		a.writeQueued()
	}
	a.writeQueued()
}

// batchLines is BatchLines, or half the queue when that is less.
func (a *Log) batchLines() int {
	return max(1, min(BatchLines, cap(a.queue)/2))
}

// writeQueued writes the lines queued now, in batches of BatchLines when the
// sink can batch, letting other goroutines run between batches; it returns
// when the queue is empty.
func (a *Log) writeQueued() {
	for more := true; more; {
		more = a.writeBatch()
		if more {
			runtime.Gosched()
		}
	}
}

// writeBatch writes up to a batch of queued lines, in one write when the sink
// can batch; it reports whether more lines may be queued.
func (a *Log) writeBatch() bool {
	if a.batcher != nil {
		a.batcher.Hold()
		defer a.batcher.Release()
	}
	for range a.batchLines() {
		select {
		case e, ok := <-a.queue:
			if !ok {
				return false
			}
			a.write(&e, &a.line)
		default:
			return false
		}
	}
	return true
}

// Add queues a line; after stop (a request that outlived the shutdown's
// drain) it is written at once.
func (a *Log) Add(e *Entry) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.stopped {
		a.write(e, &lineWriter{json: a.line.json, attrs: a.line.attrs, invalidUTF8: a.line.invalidUTF8})
		return
	}
	select {
	case a.queue <- *e:
		if !a.waiting.Load() && !a.waiting.Swap(true) || len(a.queue) >= a.batchLines() {
			select {
			case a.wake <- struct{}{}:
			default: // the writer is woken already
			}
		}
	default:
		a.dropped.Inc()
	}
}

// Stop writes the queued lines (waiting at most accessLogFlushTimeout for
// the sink) and makes later lines synchronous.
func (a *Log) Stop() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	a.stopped = true
	close(a.queue)
	close(a.wake)
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

// write formats and writes one line, in l's buffer when the access log
// writes request lines itself.
func (a *Log) write(e *Entry, l *lineWriter) {
	if e.Conn != nil {
		a.writeConn(e)
		return
	}
	routed := e.Routed
	if routed == nil {
		routed = a.unmatched
	}
	if a.direct != nil {
		l.requestLine(e, routed)
		_, _ = a.direct.w.Write(l.buf)
		return
	}
	r := slog.NewRecord(e.Time, slog.LevelInfo, "access", 0)
	r.AddAttrs(
		slog.String("listener", e.Listener),
		slog.String("method", e.Method),
		slog.String("authority", e.Authority),
		slog.String("path", e.URL.RequestURI()),
		slog.String("proto", e.Proto),
		slog.Int("status", e.Status),
		slog.Float64("duration_ms", durationMillis(e.Elapsed)),
		slog.Int64("bytes", e.Bytes),
		slog.String("upstream_cluster", e.Cluster),
		slog.String("upstream_service", e.Service),
		slog.String("upstream_host", e.UpstreamHost),
		slog.Int("attempts", e.Attempts),
		slog.String("request_id", e.RequestID),
		slog.String("vhost", routed.Vhost),
		slog.String("route", routed.Route),
		slog.String("route_path", routed.Path),
		slog.String("route_name", routed.Name),
		slog.String("downstream_remote_address", e.RemoteAddr),
	)
	if e.UpstreamErr != nil {
		r.AddAttrs(slog.String("upstream_error", e.UpstreamErr.Error()))
	}
	if e.Details != "" {
		r.AddAttrs(slog.String("response_code_details", e.Details))
	}
	_ = a.log.Handler().Handle(e.Ctx, r)
}

// writeConn writes a TCP proxy connection's line: the request line's
// attributes where they mean the same, with proto "tcp".
func (a *Log) writeConn(e *Entry) {
	c := e.Conn
	r := slog.NewRecord(e.Time, slog.LevelInfo, "access", 0)
	r.AddAttrs(
		slog.String("listener", e.Listener),
		slog.String("proto", "tcp"),
		slog.String("server_name", c.ServerName),
		slog.String("tls", c.TLS),
		slog.String("stat_prefix", c.StatPrefix),
		slog.Time("start_time", c.Start),
		slog.Float64("duration_ms", float64(e.Elapsed.Microseconds())/1000),
		slog.Int64("bytes_received", c.Received),
		slog.Int64("bytes_sent", c.Sent),
		slog.String("upstream_cluster", e.Cluster),
		slog.String("upstream_service", e.Service),
		slog.String("upstream_host", e.UpstreamHost),
		slog.String("downstream_remote_address", e.RemoteAddr),
		slog.String("termination", c.Termination),
	)
	if e.UpstreamErr != nil {
		r.AddAttrs(slog.String("upstream_error", e.UpstreamErr.Error()))
	}
	if c.DownstreamErr != nil {
		r.AddAttrs(slog.String("downstream_error", c.DownstreamErr.Error()))
	}
	_ = a.log.Handler().Handle(e.Ctx, r)
}

// Batcher is a log sink that writes what it is given between Hold and
// Release in as few writes as it can, no later than Release (Config.LogBatcher).
type Batcher interface {
	Hold()
	Release()
}
