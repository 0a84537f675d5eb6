package accesslog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// writeLine writes e's line through an access log on log.
func writeLine(log *slog.Logger, e *Entry) {
	a := New(log, nil, prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}), 1)
	a.write(e, &a.line)
}

// bothLines returns e's line as the access log writes it itself (NewLogger)
// and as slog's handler of the same format writes it.
func bothLines(t testing.TB, json bool, e *Entry) (direct, viaSlog string) {
	t.Helper()
	var d, s bytes.Buffer
	writeLine(NewLogger(&d, json, slog.LevelInfo), e)
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	var h slog.Handler = slog.NewTextHandler(&s, opts)
	if json {
		h = slog.NewJSONHandler(&s, opts)
	}
	writeLine(slog.New(h), e)
	return d.String(), s.String()
}

func sampleEntry() *Entry {
	return &Entry{
		Ctx:          context.Background(),
		Time:         time.Date(2026, 11, 28, 9, 30, 1, 120_450_000, time.UTC),
		Listener:     "ingress_http",
		Method:       "GET",
		Authority:    "app.example.com",
		URL:          url.URL{Path: "/a b", RawQuery: "q=1"},
		Proto:        "HTTP/1.1",
		Status:       200,
		Elapsed:      1234567 * time.Nanosecond,
		Bytes:        42,
		Cluster:      "default/app/80",
		Service:      "default/app:80",
		UpstreamHost: "10.0.0.1:8080",
		Attempts:     1,
		RequestID:    "4b1c0f3e-8d0a-4d5e-9d1e-6f1e2a3b4c5d",
		Routed:       &Route{Vhost: "app.example.com", Route: "/", Path: "/"},
		RemoteAddr:   "127.0.0.1:5000",
	}
}

// TestDirectLinesLikeSlog: the lines the access log writes itself are those
// slog's handlers write, in both formats, for values that need quoting or
// escaping and for the optional attributes.
func TestDirectLinesLikeSlog(t *testing.T) {
	edits := map[string]func(*Entry){
		"plain":         func(*Entry) {},
		"quoted values": func(e *Entry) { e.Authority, e.Routed.Name = `a"b=c d\e`, "x\ty\n\x00\x7f" },
		"unicode":       func(e *Entry) { e.Routed.Vhost, e.Routed.Route = "café.example", "\u2028\u2029\u00a0\ufeff" },
		"no vhost":      func(e *Entry) { e.Routed = nil },
		"invalid utf-8": func(e *Entry) { e.Method, e.Listener = "G\xffT", "\xc3" },
		"html":          func(e *Entry) { e.URL = url.URL{Path: "/<script>&amp;"} },
		"optional fields": func(e *Entry) {
			e.UpstreamErr, e.Details = errors.New("dial tcp: refused"), "upstream_reset_before_response_started{remote_reset}"
		},
		"zero time":     func(e *Entry) { e.Time = time.Time{} },
		"zone":          func(e *Entry) { e.Time = e.Time.In(time.FixedZone("x", -(3*3600 + 1800))) },
		"round millis":  func(e *Entry) { e.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		"zero duration": func(e *Entry) { e.Elapsed = 0 },
		"long duration": func(e *Entry) { e.Elapsed = 3 * time.Hour },
		"huge duration": func(e *Entry) { e.Elapsed = 1<<63 - 1 },
		"negative":      func(e *Entry) { e.Elapsed, e.Bytes, e.Status = -5*time.Microsecond, -1, -3 },
	}
	for name, edit := range edits {
		for _, json := range []bool{false, true} {
			e := sampleEntry()
			edit(e)
			d, s := bothLines(t, json, e)
			if d != s {
				t.Errorf("%s (json %v):\naccess log: %s\nslog:       %s", name, json, d, s)
			}
			if !strings.Contains(d, "msg") {
				t.Errorf("%s (json %v): no line written: %q", name, json, d)
			}
		}
	}
}

// FuzzDirectLineLikeSlog compares the access log's own lines with slog's for
// arbitrary values.
func FuzzDirectLineLikeSlog(f *testing.F) {
	f.Add("GET", "app.example.com", "/a b", "q=1", "x\"y", int64(1234567), int64(42), int64(1_700_000_000_123_456_789), "")
	f.Add("\xff", "", "/\u2028", "", "\t", int64(0), int64(-1), int64(0), "boom")
	f.Fuzz(func(t *testing.T, method, authority, path, query, other string, elapsed, bytes, unixNano int64, upstreamErr string) {
		e := sampleEntry()
		e.Method, e.Authority, e.Details = method, authority, other
		e.Routed.Vhost, e.Routed.Name = other, other+authority
		e.URL = url.URL{Path: path, RawQuery: query}
		e.Elapsed, e.Bytes = time.Duration(elapsed), bytes
		e.Time = time.Unix(0, unixNano).UTC()
		if y := e.Time.Year(); y < 0 || y > 9999 {
			return // slog's JSON handler refuses such times
		}
		if upstreamErr != "" {
			e.UpstreamErr = errors.New(upstreamErr)
		}
		for _, json := range []bool{false, true} {
			if d, s := bothLines(t, json, e); d != s {
				t.Fatalf("json %v:\naccess log: %s\nslog:       %s", json, d, s)
			}
		}
	})
}

// TestDerivedLoggerLikeSlog: a logger derived from NewLogger's with With
// (portico run's has component=proxy) still writes its request lines itself,
// its attributes where and as slog writes them; one with a group goes through
// slog.
func TestDerivedLoggerLikeSlog(t *testing.T) {
	derive := map[string]func(*slog.Logger) *slog.Logger{
		"component": func(l *slog.Logger) *slog.Logger { return l.With("component", "proxy") },
		"twice":     func(l *slog.Logger) *slog.Logger { return l.With("a", 1).With("b", "x y", "c", 2.5) },
		"quoted":    func(l *slog.Logger) *slog.Logger { return l.With("k=", "\"v\"\n", "t", time.Unix(5, 0).UTC()) },
		"group":     func(l *slog.Logger) *slog.Logger { return l.WithGroup("g").With("k", "v") },
	}
	for name, d := range derive {
		for _, json := range []bool{false, true} {
			var direct, viaSlog bytes.Buffer
			dl := d(NewLogger(&direct, json, slog.LevelInfo))
			opts := &slog.HandlerOptions{Level: slog.LevelInfo}
			var h slog.Handler = slog.NewTextHandler(&viaSlog, opts)
			if json {
				h = slog.NewJSONHandler(&viaSlog, opts)
			}
			sl := d(slog.New(h))
			writeLine(dl, sampleEntry())
			writeLine(sl, sampleEntry())
			if direct.String() != viaSlog.String() {
				t.Errorf("%s (json %v):\naccess log: %s\nslog:       %s", name, json, direct.String(), viaSlog.String())
			}
			_, isDirect := dl.Handler().(*directHandler)
			if isDirect == (name == "group") {
				t.Errorf("%s (json %v): written directly %v", name, json, isDirect)
			}
		}
	}
}

// TestNewLoggerLevel: the logger keeps its level for the access log's
// Enabled and for its other records.
func TestNewLoggerLevel(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, true, slog.LevelWarn)
	a := New(log, nil, prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}), 1)
	if a.Enabled(context.Background()) {
		t.Fatal("access log enabled on a warn-level logger")
	}
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"msg":"shown","k":"v"`) {
		t.Fatalf("logger wrote %q", got)
	}
}

// BenchmarkWriteLine compares the two ways a request line gets written.
func BenchmarkWriteLine(b *testing.B) {
	for _, json := range []bool{false, true} {
		name := "text"
		if json {
			name = "json"
		}
		opts := &slog.HandlerOptions{Level: slog.LevelInfo}
		var h slog.Handler = slog.NewTextHandler(discard{}, opts)
		if json {
			h = slog.NewJSONHandler(discard{}, opts)
		}
		for side, log := range map[string]*slog.Logger{"slog": slog.New(h), "direct": NewLogger(discard{}, json, slog.LevelInfo)} {
			b.Run(name+"/"+side, func(b *testing.B) {
				a := New(log, nil, prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}), 1)
				e := sampleEntry()
				b.ReportAllocs()
				for b.Loop() {
					a.write(e, &a.line)
				}
			})
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// countingSink is a batching sink that counts its writes and lines.
type countingSink struct {
	mu            sync.Mutex
	held          bool
	writes, lines int
	pending       int
}

func (c *countingSink) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := bytes.Count(p, []byte("\n"))
	if c.held {
		c.pending += n
		return len(p), nil
	}
	c.writes++
	c.lines += n
	return len(p), nil
}

func (c *countingSink) Hold() { c.mu.Lock(); c.held = true; c.mu.Unlock() }

func (c *countingSink) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	if c.pending > 0 {
		c.writes++
		c.lines += c.pending
		c.pending = 0
	}
}

func (c *countingSink) counts() (writes, lines int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.lines
}

// TestBatchWaitsUntilHalfFull: with a batching sink, queued lines wait for
// the flush delay (here an hour) unless a batch is ready (BatchLines, or half
// the queue when that is less), when they are written at once, in one write;
// Stop writes what is left.
func TestBatchWaitsUntilHalfFull(t *testing.T) {
	sink := &countingSink{}
	a := New(NewLogger(sink, false, slog.LevelInfo), sink, prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}), 8)
	a.delay = time.Hour
	a.Start()
	for range 3 {
		a.Add(sampleEntry())
	}
	a.Add(sampleEntry()) // the fourth: half of 8
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, lines := sink.counts(); lines == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a ready batch was not written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if writes, _ := sink.counts(); writes != 1 {
		t.Errorf("4 lines took %d writes, want 1", writes)
	}
	a.Add(sampleEntry())
	a.Stop()
	if writes, lines := sink.counts(); lines != 5 || writes != 2 {
		t.Errorf("after Stop: %d lines in %d writes, want 5 in 2", lines, writes)
	}
}

// A route's attributes are formatted once per format and kept: lines of
// both formats that share a Route, in turn, each say what slog says.
func TestSharedRouteLinesLikeSlog(t *testing.T) {
	shared := &Route{Vhost: "café.example", Route: "httpproxy/shop/web", Path: "/a b", Name: `x"y`}
	for i := range 3 {
		for _, json := range []bool{false, true, false} {
			e := sampleEntry()
			e.Routed, e.Status = shared, 200+i
			if d, s := bothLines(t, json, e); d != s {
				t.Errorf("line %d (json %v):\naccess log: %s\nslog:       %s", i, json, d, s)
			}
		}
	}
	if shared.formatted[0].Load() == nil || shared.formatted[1].Load() == nil {
		t.Error("the route's attributes were not kept for either format")
	}
}

// rfc3339Millis is slog's TextHandler's time format, made the slow way, as
// slog makes it (for four-digit years: a clock's; slog drops the wrong digit
// of a five-digit year's).
func rfc3339Millis(t time.Time) string {
	s := t.Truncate(time.Millisecond).Add(time.Millisecond / 10).Format(time.RFC3339Nano)
	const prefixLen = len("2006-01-02T15:04:05.000")
	return s[:prefixLen] + s[prefixLen+1:]
}

// checkStamps formats times in turn through one cache, in both formats, and
// compares each with the time package's formatting of it alone.
func checkStamps(t *testing.T, times ...time.Time) {
	t.Helper()
	var c stampCache
	for _, tm := range times {
		if got, want := string(c.appendRFC3339Millis(nil, tm)), rfc3339Millis(tm); got != want {
			t.Errorf("text time of %v: %s, want %s", tm, got, want)
		}
		if got, want := string(c.appendRFC3339Nano(nil, tm)), tm.Format(time.RFC3339Nano); got != want {
			t.Errorf("JSON time of %v: %s, want %s", tm, got, want)
		}
	}
}

// TestStampCacheFormatsLikeTime: a writer's times, formatted a second at a
// time, come out as the time package writes each: within a second, across
// seconds and back, across locations of the same instant, whole seconds,
// and a zone offset change.
func TestStampCacheFormatsLikeTime(t *testing.T) {
	base := time.Date(2026, 11, 29, 8, 13, 59, 0, time.UTC)
	india := time.FixedZone("IST", 5*3600+1800)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("EST", -5*3600)
	}
	dst := time.Date(2026, 3, 8, 6, 59, 59, 999_000_000, time.UTC) // a second before New York's clocks go forward
	checkStamps(t,
		base, base.Add(1), base.Add(123_456_789), base.Add(999_999_999),
		base.Add(time.Second), base.Add(time.Second+time.Millisecond), base,
		base.In(india), base.Add(5*time.Millisecond).In(india), base.Local(), base.Add(10*time.Millisecond),
		base.Add(100*time.Millisecond).In(ny), base.Add(120*time.Millisecond),
		dst.In(ny), dst.Add(time.Millisecond).In(ny), dst.Add(2*time.Millisecond).In(ny),
		time.Unix(0, 0).UTC(), time.Unix(-1, 5).UTC())
}

// FuzzStampCacheLikeTime formats two times through one cache, the second in
// both a fixed zone and UTC, against the time package.
func FuzzStampCacheLikeTime(f *testing.F) {
	f.Add(int64(1_764_404_039_123_456_789), int64(1_764_404_039_999_000_000), int32(19800))
	f.Add(int64(0), int64(-1), int32(-18000))
	f.Fuzz(func(t *testing.T, a, b int64, offset int32) {
		zone := time.FixedZone("Z", int(offset%(18*3600)))
		ta, tb := time.Unix(0, a).In(zone), time.Unix(0, b)
		checkStamps(t, ta, tb.In(zone), tb.UTC(), ta)
	})
}
