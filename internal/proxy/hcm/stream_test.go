package hcm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// keepingWriter is a response writer whose connection keeps a slot, as the
// HTTP/1.1 codec's does.
type keepingWriter struct {
	*httptest.ResponseRecorder
	slot any
}

func (w *keepingWriter) Kept() *any { return &w.slot }

// A connection's next request gets the stream its last request left quiet,
// emptied; a stream left in use gets a new one.
func TestKeptStreamForReusesWhatTheConnectionKept(t *testing.T) {
	e := &Env{}
	keptStreamFor := e.keptStreamFor
	w := &keepingWriter{ResponseRecorder: httptest.NewRecorder()}
	k, slot := keptStreamFor(w)
	if k == nil || slot != &w.slot {
		t.Fatal("the codec's slot was not offered for keeping the stream")
	}
	if k.rw.kept != k || k.targetTaken || k.filtersTaken {
		t.Error("a new kept stream does not offer its target and filter stream")
	}
	k.ex.logged, k.rw.status, k.targetTaken = accesslog.NewVhostRoute("old"), http.StatusTeapot, true
	k.target.path = "/old"
	*slot = k
	again, _ := keptStreamFor(w)
	if again != k {
		t.Fatal("the kept stream was not reused")
	}
	if again.ex.logged != nil || again.rw.status != 0 || again.target.path != "" {
		t.Errorf("the reused stream kept its last request's state: routed %v, status %d, target path %q",
			again.ex.logged, again.rw.status, again.target.path)
	}
	if again.rw.kept != again || again.targetTaken {
		t.Error("the reused stream does not offer its target again")
	}
	if w.slot != nil {
		t.Error("the slot still holds the stream now in use")
	}
	if next, _ := keptStreamFor(w); next == k {
		t.Error("a stream in use (not kept again) was handed out a second time")
	}
}

// A writer that keeps nothing (an HTTP/2 stream's) gets its stream from the
// environment's pool, emptied, and keep puts it back there once the request
// is over, unless something may still reach it: a request body, or a head
// Go's HTTP/2 server would write from the stream's values after the handler
// returns.
func TestKeptStreamForPoolsTheStreamsOfWritersWithoutASlot(t *testing.T) {
	e := &Env{}
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	k, slot := e.keptStreamFor(httptest.NewRecorder())
	if k == nil || slot != nil || k.rw.kept != k {
		t.Fatalf("a writer without a slot got stream %p, slot %p", k, slot)
	}
	// sync.Pool may drop what it is given (under the race detector it does,
	// at random): a stream kept again and again comes back some time.
	reused := false
	for range 100 {
		k.rw.ResponseWriter = httptest.NewRecorder()
		k.rw.status, k.target.path, k.targetTaken = http.StatusOK, "/old", true
		k.rw.headerSent.Store(true)
		k.target.quiet = true
		e.keep(k, slot, get)
		again, _ := e.keptStreamFor(httptest.NewRecorder())
		if again != k {
			continue // dropped: the pool was empty
		}
		reused = true
		if again.rw.status != 0 || again.target.path != "" || again.targetTaken || again.rw.kept != again {
			t.Fatalf("the pooled stream kept its last request's state: status %d, target path %q",
				again.rw.status, again.target.path)
		}
		break
	}
	if !reused {
		t.Fatal("a stream kept without a slot never came back from the pool")
	}

	for name, leave := range map[string]func(k *keptStream) *http.Request{
		"no head written": func(k *keptStream) *http.Request { return get },
		"a request body": func(k *keptStream) *http.Request {
			k.rw.headerSent.Store(true)
			return httptest.NewRequest(http.MethodPost, "/", strings.NewReader("body"))
		},
		"a target still reached": func(k *keptStream) *http.Request {
			k.rw.headerSent.Store(true)
			k.targetTaken = true
			return get
		},
		"declared trailers": func(k *keptStream) *http.Request {
			k.rw.headerSent.Store(true)
			k.rw.Header().Set("Trailer", "X-Echo")
			return get
		},
	} {
		// sync.Pool drops a quarter of what it is given under the race
		// detector: a stream kept by mistake is found within a few tries.
		e := &Env{}
		for range 20 {
			k, slot := e.keptStreamFor(httptest.NewRecorder())
			k.rw.ResponseWriter = httptest.NewRecorder()
			e.keep(k, slot, leave(k))
			if again, _ := e.keptStreamFor(httptest.NewRecorder()); again == k {
				t.Fatalf("%s: the stream was pooled for another request", name)
			}
		}
	}
}

// Keeping a stream drops what it holds of its request, so that an idle
// connection does not keep a configuration or an upstream connection alive,
// but for the Server and X-Request-Id values the codec's header map may still
// write.
func TestKeptStreamForgetsAllButTheHeadsValues(t *testing.T) {
	k := new(keptStream)
	h := http.Header{}
	k.rw.ResponseWriter = &keepingWriter{ResponseRecorder: httptest.NewRecorder()}
	k.rw.setEdge(h, 1, "X-Request-Id", "abc")
	k.ex.logged, k.target.path, k.rw.hcm = accesslog.NewVhostRoute("old"), "/old", &Spec{}
	up, _ := upstreamHeader(http.Header{"Cookie": {"secret"}, "Connection": {"close"}}, edgeHeaders, &k.header)
	if len(up) != 1 || up.Get("Cookie") != "secret" {
		t.Fatalf("the upstream header made in the kept room is %v", up)
	}
	room := cap(k.header.values)
	out := k.upstreamRequest(httptest.NewRequest(http.MethodGet, "/old", nil))
	k.forget()
	if k.ex.logged != nil || k.target.path != "" || k.rw.hcm != nil || k.rw.ResponseWriter != nil {
		t.Error("the kept stream still holds its request's state")
	}
	if k.out != out || out.URL != nil || out.Header != nil || out.Method != "" || out.Context() != context.Context(&k.target) {
		t.Errorf("the kept upstream request still holds its request's fields, or lost its context: %+v", out)
	}
	if len(up) != 0 || cap(k.header.values) != room || k.header.values[:1][0] != "" {
		t.Errorf("the kept room for the upstream header still holds %v, %q (or lost its room)", up, k.header.values[:1])
	}
	again, _ := upstreamHeader(http.Header{"Accept": {"*/*"}}, edgeHeaders, &k.header)
	if len(again) != 1 || again.Get("Accept") != "*/*" || again.Get("Cookie") != "" {
		t.Errorf("the next request's upstream header, made in the kept room, is %v", again)
	}
	if got := h.Get("X-Request-Id"); got != "abc" {
		t.Errorf("the head's X-Request-Id became %q", got)
	}
}

// A served request's stream is kept only when nothing can reach it any more.
func TestKeptStreamQuietOnlyWhenNothingHoldsIt(t *testing.T) {
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	post := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hello"))
	fresh := func() *keptStream {
		k := new(keptStream)
		k.rw.kept = k
		return k
	}
	if k := fresh(); !k.quiet(get) {
		t.Error("a request answered without forwarding was not quiet")
	}
	if k := fresh(); k.quiet(post) {
		t.Error("a request with a body (its writer may outlive the response) was quiet")
	}
	k := fresh()
	k.rw.status = http.StatusSwitchingProtocols
	if k.quiet(get) {
		t.Error("an upgraded request (spliced by goroutines) was quiet")
	}
	k = fresh()
	k.targetTaken = true // forwarded
	if k.quiet(get) {
		t.Error("a forwarded request whose target did not settle quiet was quiet")
	}
	k.target.quiet = true
	if !k.quiet(get) {
		t.Error("a forwarded request whose target settled quiet was not")
	}
}

// A forward's target settles quiet only when the codec's client made its one
// attempt, without a body, mirror, redirect, per-try timeout or timer that
// went off: each of those can still reach it after the response.
func TestTargetSettlesQuietOnlyWithoutLateHolders(t *testing.T) {
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	withBody := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hello"))
	for _, tc := range []struct {
		name   string
		change func(*upstreamTarget, *router.ForwardAction) *http.Request
		want   bool
	}{
		{"codec, one attempt, pooled connection", func(*upstreamTarget, *router.ForwardAction) *http.Request { return get }, true},
		{"codec, dialled", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.CodecExchange(true)
			return get
		}, false},
		{"Go's transport", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.codecExchanged = false
			return get
		}, false},
		{"cluster transport", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.cluster = &upstream.Cluster{Transport: http.DefaultTransport}
			return get
		}, false},
		{"retried", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.attempts = 2
			return get
		}, false},
		{"per-try timeout", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.retry = &router.RetryPolicy{PerTryTimeout: time.Second}
			return get
		}, false},
		{"request body", func(*upstreamTarget, *router.ForwardAction) *http.Request { return withBody }, false},
		{"mirror", func(_ *upstreamTarget, fa *router.ForwardAction) *http.Request {
			fa.Mirrors = make([]router.MirrorPolicy, 1)
			return get
		}, false},
		{"internal redirect", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.redirect = &pendingRedirect{}
			return get
		}, false},
		{"idle timer went off", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.idleState.disturbed = true
			return get
		}, false},
		{"route timer went off", func(t *upstreamTarget, _ *router.ForwardAction) *http.Request {
			t.routeState.disturbed = true
			return get
		}, false},
	} {
		tg := &upstreamTarget{cluster: &upstream.Cluster{}, retry: &router.RetryPolicy{}, attempts: 1, codecExchanged: true}
		fa := &router.ForwardAction{}
		r := tc.change(tg, fa)
		tg.settle(r, fa)
		if tg.quiet != tc.want {
			t.Errorf("%s: quiet = %v, want %v", tc.name, tg.quiet, tc.want)
		}
	}
}

// The room of an upstream request's header is kept emptied, but dropped once a
// request of many fields grew it: a connection would otherwise keep the room
// of its largest request.
func TestHeaderRoomDroppedWhenGrown(t *testing.T) {
	var b headerBuf
	upstreamHeader(http.Header{"Accept": {"*/*"}}, edgeHeaders, &b)
	b.forget()
	if b.m == nil || len(b.m) != 0 || b.values[0] != "" {
		t.Errorf("a small room was not kept emptied: %v, %q", b.m, b.values)
	}
	many := http.Header{}
	for i := range 2 * upstream.MaxRoomFields {
		many[fmt.Sprintf("X-F%d", i)] = []string{"v"}
	}
	upstreamHeader(many, edgeHeaders, &b)
	b.forget()
	if b.m != nil || b.values != nil {
		t.Errorf("a room grown to %d fields was kept", 2*upstream.MaxRoomFields)
	}
}

// slotWriter is an HTTP/1.1 connection's writer, with its slot (keeper).
type slotWriter struct {
	*httptest.ResponseRecorder
	slot any
}

func (w *slotWriter) Kept() *any { return &w.slot }

// A stream an HTTP/1.1 connection kept goes to the pool when the codec
// releases it at the connection's end, and a request of a new connection
// (an empty slot) takes it from there; never while its connection holds it.
func TestKeptStreamReleasedByItsConnectionServesAnother(t *testing.T) {
	e := &Env{}
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	reused := false
	for range 100 { // sync.Pool may drop what it is given (see above)
		first := &slotWriter{ResponseRecorder: httptest.NewRecorder()}
		k, slot := e.keptStreamFor(first)
		if slot != first.Kept() {
			t.Fatal("a writer with a slot was not given it")
		}
		k.rw.status, k.target.path, k.targetTaken = http.StatusOK, "/old", true
		k.target.quiet = true
		e.keep(k, slot, get)
		if first.slot != k {
			t.Fatal("a quiet stream was not kept in its connection's slot")
		}
		if other, _ := e.keptStreamFor(&slotWriter{ResponseRecorder: httptest.NewRecorder()}); other == k {
			t.Fatal("a new connection took the stream another connection keeps")
		}
		first.slot.(interface{ Release() }).Release()
		again, slot := e.keptStreamFor(&slotWriter{ResponseRecorder: httptest.NewRecorder()})
		if again != k {
			continue // dropped by the pool
		}
		reused = true
		if slot == nil || again.rw.status != 0 || again.target.path != "" || again.targetTaken || again.rw.kept != again {
			t.Fatalf("the released stream kept its last request's state: status %d, target path %q",
				again.rw.status, again.target.path)
		}
		break
	}
	if !reused {
		t.Fatal("a released stream never served a new connection")
	}
}
