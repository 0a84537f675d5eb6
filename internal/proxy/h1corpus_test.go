package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/portico-dev/portico/internal/proxy/internal/h1corpus"
)

// -update-corpus records each case's outcome as its today line and rewrites
// the deviation table of docs/dev/http1-corpus.md.
var updateCorpus = flag.Bool("update-corpus", false, "record the HTTP/1.1 corpus outcomes (today lines) and the docs' deviation table")

const (
	corpusRequests  = "internal/h1corpus/testdata/requests.txt"
	corpusResponses = "internal/h1corpus/testdata/responses.txt"
	corpusDoc       = "../../docs/dev/http1-corpus.md"
	// corpusDeadline bounds each case; a case reaching it is recorded as a
	// "timeout", never passes because something was slow.
	corpusDeadline = 10 * time.Second
	probeRequest   = "GET /__probe HTTP/1.1\r\nHost: corpus\r\n\r\n"
	probeBody      = "probe"
)

// TestH1Corpus sends every case of the HTTP/1.1 parser safety corpus to the
// proxy over raw TCP, through a listener configured as the translator
// configures it, to raw backends that record what they receive, and asserts
// the outcome recorded in the corpus as today's: a change of behaviour,
// better or worse, shows here and in the deviation table.
func TestH1Corpus(t *testing.T) {
	requests, err := h1corpus.Load(corpusRequests)
	if err != nil {
		t.Fatal(err)
	}
	responses, err := h1corpus.Load(corpusResponses)
	if err != nil {
		t.Fatal(err)
	}
	echoes := startRecordingBackend(t, nil)
	replies := map[string][]byte{}
	for _, c := range responses {
		replies["/reply/"+c.Name] = c.Reply
	}
	replier := startRecordingBackend(t, replies)

	cp := startControlPlane(t)
	cp.set("v1", corpusResources(t, echoes.addr(), replier.addr()))
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	addr := p.ListenerAddr("ingress_http")

	run := func(corpus string, cases []*h1corpus.Case, b *recordingBackend, detail bool) map[string]h1corpus.Outcome {
		got := map[string]h1corpus.Outcome{}
		for _, c := range cases {
			send := c.Send
			if len(send) == 0 {
				send = []byte("GET /reply/" + c.Name + " HTTP/1.1\r\nHost: corpus\r\n\r\n")
			}
			b.reset()
			answer := corpusExchange(t, addr, send, detail)
			o := h1corpus.Outcome{Answer: answer, Backend: b.summary(detail)}
			got[c.Name] = o
			if !*updateCorpus && o != c.Today {
				t.Errorf("%s:%d %s: got\n\t%s\nrecorded today:\n\t%s", corpus, c.Line, c.Name, o, c.Today)
			}
		}
		return got
	}
	gotReq := run(corpusRequests, requests, echoes, false)
	gotRes := run(corpusResponses, responses, replier, true)
	if *updateCorpus {
		recordToday(t, corpusRequests, gotReq)
		recordToday(t, corpusResponses, gotRes)
		requests, _ = h1corpus.Load(corpusRequests)
		responses, _ = h1corpus.Load(corpusResponses)
		doc, err := os.ReadFile(corpusDoc)
		if err != nil {
			t.Fatal(err)
		}
		table := h1corpus.DeviationTable([]string{"requests", "responses"}, map[string][]*h1corpus.Case{"requests": requests, "responses": responses})
		out, err := h1corpus.ReplaceTable(string(doc), table)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(corpusDoc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func recordToday(t *testing.T, path string, got map[string]h1corpus.Outcome) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, h1corpus.SetToday(data, got), 0o644); err != nil {
		t.Fatal(err)
	}
}

// corpusResources: any Host reaches the echoing backend, /reply/ the
// backend answering each response case's bytes, /__probe a direct response
// that shows the connection still serves requests. The listener is the
// translator's: HTTP/1.0 accepted, a chunked request's Content-Length dropped.
func corpusResources(t *testing.T, echoes, replier string) resources {
	l := modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowChunkedLength: true}
	})
	probe := &routev3.Route{Name: "probe", Match: exactMatch("/__probe"), Action: &routev3.Route_DirectResponse{
		DirectResponse: &routev3.DirectResponseAction{Status: 200, Body: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: probeBody},
		}},
	}}
	return resources{
		listeners: []*listenerv3.Listener{l},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			probe, toCluster("replier", prefixMatch("/reply/")), toCluster("echoes", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("echoes"), edsCluster("replier")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("echoes", echoes), assignment("replier", replier)},
	}
}

// corpusExchange sends send on a new connection and describes what comes
// back: each response (detail: with its framing, body and X-Corpus-*
// headers), then "open" when a probe sent after the first final response is
// answered, "close" when the proxy closes the connection, "timeout" when
// nothing more comes within the deadline.
func corpusExchange(t *testing.T, addr string, send []byte, detail bool) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, corpusDeadline)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(corpusDeadline))
	_, _ = conn.Write(send) // a write the proxy refuses shows in what is read
	method, _, _ := strings.Cut(string(send), " ")
	br := bufio.NewReader(conn)
	var parts []string
	probed := false
	for {
		res, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return strings.Join(append(parts, readEnd(err)), " ")
		}
		body, bodyErr := io.ReadAll(res.Body)
		res.Body.Close()
		if probed && res.StatusCode == 200 && string(body) == probeBody {
			return strings.Join(append(parts, "open"), " ")
		}
		if bodyErr != nil && len(body) == 0 && res.StatusCode < 300 {
			// A head with no byte of its body before the close: whether
			// today's proxy flushed the head before the upstream body failed
			// is a race; to the client both are the same failure.
			return strings.Join(append(parts, readEnd(bodyErr)), " ")
		}
		parts = append(parts, describeResponse(res, body, bodyErr, detail))
		if bodyErr != nil {
			return strings.Join(append(parts, readEnd(bodyErr)), " ")
		}
		if res.StatusCode == http.StatusSwitchingProtocols {
			return strings.Join(append(parts, "upgraded"), " ")
		}
		if res.StatusCode >= 200 && !probed && !res.Close {
			probed = true
			method = http.MethodGet
			_, _ = io.WriteString(conn, probeRequest)
		}
	}
}

// readEnd names how reading ended: the proxy closed the connection, or
// nothing came in time, or it sent what is not HTTP.
func readEnd(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), isReset(err):
		return "close"
	}
	return "garbage"
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

func describeResponse(res *http.Response, body []byte, bodyErr error, detail bool) string {
	if !detail || res.StatusCode >= 400 {
		// An error's body is the proxy's own words, not the case's point.
		return strconv.Itoa(res.StatusCode)
	}
	s := fmt.Sprintf("%d %s %q", res.StatusCode, framing(res.TransferEncoding, res.Header, res.ContentLength), body)
	if bodyErr != nil {
		s += " truncated"
	}
	return s + corpusHeaders(res.Header, nil)
}

func framing(te []string, h http.Header, length int64) string {
	switch {
	case slices.Contains(te, "chunked"):
		return "chunked"
	case h.Get("Content-Length") != "":
		return "length"
	case length < 0:
		return "eof"
	}
	return "none"
}

// corpusHeaders lists the headers a case asserts on: X-Corpus-* (trailers
// prefixed "trailer:") and the ones whose forwarding the RFCs rule on.
func corpusHeaders(h, trailer http.Header) string {
	var out []string
	add := func(prefix string, h http.Header) {
		for name, values := range h {
			lower := strings.ToLower(name)
			if strings.HasPrefix(lower, "x-corpus") || lower == "upgrade" || lower == "expect" || lower == "te" || lower == "connection" {
				out = append(out, fmt.Sprintf("%s%s=%q", prefix, lower, strings.Join(values, ",")))
			}
		}
	}
	add("", h)
	add("trailer:", trailer)
	slices.Sort(out)
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " ")
}

// recordingBackend is a raw TCP backend: it reads requests with a parser of
// its own choosing (net/http's: the proxy's output is what is judged, not
// the backend), records each, and answers either a fixed response, keeping
// the connection, or (replies) the bytes a response case gives, closing it.
type recordingBackend struct {
	ln      net.Listener
	replies map[string][]byte
	mu      sync.Mutex
	got     []string
}

func startRecordingBackend(t *testing.T, replies map[string][]byte) *recordingBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &recordingBackend{ln: ln, replies: replies}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(conn)
		}
	}()
	return b
}

func (b *recordingBackend) addr() string { return b.ln.Addr().String() }

func (b *recordingBackend) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = nil
}

func (b *recordingBackend) record(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, s)
}

// summary is "none", the requests received, or (detail: the response
// corpus, where only retries matter) how many.
func (b *recordingBackend) summary(detail bool) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if detail {
		return strconv.Itoa(len(b.got))
	}
	if len(b.got) == 0 {
		return "none"
	}
	return strings.Join(b.got, " ; ")
}

func (b *recordingBackend) serve(conn net.Conn) {
	defer conn.Close()
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(conn, &raw))
	for {
		raw.Reset()
		r, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				b.record(fmt.Sprintf("unparseable %q", raw.String()))
			}
			return
		}
		if r.Header.Get("Expect") == "100-continue" {
			_, _ = io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n")
		}
		body, err := io.ReadAll(r.Body)
		summary := fmt.Sprintf("%s %s host=%s %s %q%s", r.Method, r.RequestURI, r.Host,
			framing(r.TransferEncoding, r.Header, r.ContentLength), body, corpusHeaders(r.Header, r.Trailer))
		if err != nil {
			// The head came, its body never completed: not a request the
			// backend serves. Not recorded: whether net/http flushes the
			// head before the body's error shows is a race in today's proxy.
			return
		}
		b.record(summary)
		if reply, ok := b.replies[r.URL.Path]; ok {
			_, _ = conn.Write(reply)
			return
		}
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}
