package hcm

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/textproto"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"

	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// The connection manager's own reverse proxy: it sends the upstream request
// through the attempts (attemptTransport) and copies the response to the
// client, as httputil.ReverseProxy did for it before, with one copy of the
// request instead of three, and no work for what the connection manager does
// itself (edge headers, client addresses). What it keeps of ReverseProxy's
// behaviour: hop-by-hop headers removed both ways (RFC 9110 section 7.6.1),
// upgrades spliced, 1xx responses passed on, unknown-length and event-stream
// responses flushed as they arrive, trailers, and an upstream body that fails
// aborting the response (never ending it as if it were whole).

// hopByHopFields are never forwarded, in either direction (nor by a mirror's
// copy), besides those a Connection field names.
var hopByHopFields = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// isHopByHop reports whether a field (its canonical name) is one of
// hopByHopFields. A switch, not a loop over them: it runs for every field of
// every request and response (a loop made removeHopByHop 11% slower).
func isHopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// isHopByHopFold reports whether name, in any case, is hop-by-hop.
func isHopByHopFold(name string) bool {
	for _, f := range hopByHopFields {
		if len(f) == len(name) && strings.EqualFold(f, name) {
			return true
		}
	}
	return false
}

// isForwardingField reports whether a field is one the connection manager
// sets itself on the upstream request, dropping what the client sent.
func isForwardingField(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// removeNamedByConnection drops the fields the Connection field's values conn
// name. A name that is hop-by-hop anyway (the usual keep-alive) costs no lookup
// and no canonical copy; the work grows with the names listed, never with the
// names times the fields.
func removeNamedByConnection(h http.Header, conn []string) {
	for _, f := range conn {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" && !isHopByHopFold(sf) {
				h.Del(sf)
			}
		}
	}
}

// removeHopByHop drops the hop-by-hop fields of h (RFC 9110 section 7.6.1):
// one pass over its fields rather than a lookup per name that could be there,
// then the names Connection lists.
func removeHopByHop(h http.Header) {
	conn := h["Connection"]
	for k := range h {
		if isHopByHop(k) {
			delete(h, k)
		}
	}
	removeNamedByConnection(h, conn)
}

// proxy forwards out, the request's own copy for its upstream (its context
// carries its upstreamTarget), and copies the response to rw.
func (e *Env) proxy(rw http.ResponseWriter, out *http.Request) {
	if err := prepareUpstream(out); err != nil {
		e.upstreamError(rw, out, err)
		return
	}
	t := targetFrom(out.Context())
	res, err := e.roundTrip(out, t)
	if err != nil {
		e.upstreamError(rw, out, err)
		return
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		if e.modifyResponse(rw, res, out, t) {
			e.splice(rw, out, res)
		}
		return
	}
	removeHopByHop(res.Header)
	if !e.modifyResponse(rw, res, out, t) {
		return
	}
	h := rw.Header()
	for k, vv := range res.Header {
		if len(h[k]) == 0 {
			h[k] = vv // res.Header is not used again: its values need no copy
			continue
		}
		h[k] = append(h[k], vv...)
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	rw.WriteHeader(res.StatusCode)
	if err := e.copyBody(rw, res); err != nil {
		_ = res.Body.Close()
		e.log.Debug("upstream response body failed", "error", err)
		// Abort: the client must see a cut response, not a whole one.
		panic(http.ErrAbortHandler)
	}
	_ = res.Body.Close() // now, so that res.Trailer is filled
	if len(res.Trailer) == 0 {
		return
	}
	_ = http.NewResponseController(rw).Flush() // trailers need chunking
	for k, vv := range res.Trailer {
		if len(res.Trailer) != announced {
			k = http.TrailerPrefix + k
		}
		h[k] = append(h[k], vv...)
	}
}

// prepareUpstream makes out (a shallow copy of the downstream request) the
// request sent upstream: its own header (hop-by-hop fields removed, an
// upgrade's kept, the forwarding fields Portico sets itself dropped) and URL,
// pointed at the endpoint.
func prepareUpstream(out *http.Request) error {
	te := httpguts.HeaderValuesContainsToken(out.Header["Te"], "trailers")
	upgrade := upgradeOf(out.Header)
	t := targetFrom(out.Context())
	out.Header, t.edgeValues = upstreamHeader(out.Header, edgeHeaders, t.header)
	t.url = *out.URL
	out.URL = &t.url
	if out.ContentLength == 0 {
		out.Body = nil // a request without a body can be retried on a new connection
	}
	out.Close = false
	if upgrade != "" && !isPrint(upgrade) {
		return fmt.Errorf("client tried to switch to invalid protocol %q", upgrade)
	}
	if te {
		out.Header.Set("Te", "trailers")
	}
	if upgrade != "" {
		out.Header.Set("Connection", "Upgrade")
		out.Header.Set("Upgrade", upgrade)
	}
	rewriteUpstreamRequest(out, t)
	if _, ok := out.Header["User-Agent"]; !ok {
		setEdgeHeader(out.Header, &t.edgeValues, "User-Agent", "") // no Go default User-Agent
	}
	return nil
}

// edgeHeaders is how many header values the connection manager sets on every
// upstream request at most (X-Forwarded-For, X-Forwarded-Proto, X-Request-Id,
// X-Forwarded-Client-Cert, and an empty User-Agent when the client sent none).
const edgeHeaders = 5

// headerBuf is room for an upstream request's header that a kept stream
// keeps from request to request: the map, emptied, and its values' array.
type headerBuf struct {
	m      http.Header
	values []string
}

// forget empties the room, or drops it when a request of many fields grew it:
// each connection would otherwise keep the room of its largest request.
func (b *headerBuf) forget() {
	if len(b.m) > upstream.MaxRoomFields || cap(b.values) > upstream.MaxRoomFields {
		b.m, b.values = nil, nil
		return
	}
	clear(b.m)
	clear(b.values[:cap(b.values)])
}

// upstreamHeader copies h without its hop-by-hop and forwarding fields, with
// room for spare more single-value fields: their values' array comes with the
// copy's (see setEdgeHeader), rather than in an allocation each as Header.Set
// makes. The copy is made in buf when not nil.
func upstreamHeader(h http.Header, spare int, buf *headerBuf) (http.Header, []string) {
	n := spare
	for _, vv := range h {
		n += len(vv)
	}
	var values []string
	var out http.Header
	if buf == nil {
		values, out = make([]string, n), make(http.Header, len(h)+spare)
	} else {
		if cap(buf.values) < n {
			buf.values = make([]string, n)
		}
		if buf.m == nil {
			buf.m = make(http.Header, len(h)+spare)
		}
		values, out = buf.values[:n], buf.m // emptied by forget
	}
	for k, vv := range h {
		if isHopByHop(k) || isForwardingField(k) {
			continue
		}
		if vv == nil {
			out[k] = nil // kept, as Header.Clone keeps it
			continue
		}
		m := copy(values, vv)
		out[k], values = values[:m:m], values[m:]
	}
	removeNamedByConnection(out, h["Connection"])
	return out, values[:0:spare]
}

// setEdgeHeader sets the field k (canonical) to v, its value in the spare
// array upstreamHeader left.
func setEdgeHeader(h http.Header, spare *[]string, k, v string) {
	if len(*spare) == cap(*spare) {
		h[k] = []string{v}
		return
	}
	*spare = append(*spare, v)
	n := len(*spare)
	h[k] = (*spare)[n-1 : n : n]
}

// errConnect: CONNECT is not tunnelled.
var errConnect = errors.New("client sent unsupported CONNECT request")

// roundTrip makes the attempts; interim (1xx) responses go to the client as
// they arrive, until the final one does.
func (e *Env) roundTrip(out *http.Request, t *upstreamTarget) (*http.Response, error) {
	if out.Method == http.MethodConnect {
		return nil, errConnect
	}
	res, err := attemptTransport{base: e.transport}.RoundTrip(out)
	t.interims.finish()
	return res, err
}

// GotInterim passes an interim response of the upstream on to the client,
// until the final response has come (upstream.InterimReceiver).
func (t *upstreamTarget) GotInterim(code int, header textproto.MIMEHeader) error {
	return t.interims.got(t.rw, code, header)
}

// interims passes 1xx responses on until the final response has come.
type interims struct {
	mu   sync.Mutex
	done bool
}

func (i *interims) finish() {
	i.mu.Lock()
	i.done = true
	i.mu.Unlock()
}

func (i *interims) got(rw http.ResponseWriter, code int, header textproto.MIMEHeader) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.done {
		return nil
	}
	h := rw.Header()
	for k, vv := range header {
		h[k] = append(h[k], vv...)
	}
	removeHopByHop(h) // as from a final response
	rw.WriteHeader(code)
	clear(h) // a 1xx's fields are its own
	return nil
}

// modifyResponse applies the route's response headers and the filters'
// encoders, or follows an internal redirect; false when the response was
// answered otherwise (through upstreamError).
func (e *Env) modifyResponse(rw http.ResponseWriter, res *http.Response, out *http.Request, t *upstreamTarget) bool {
	if t.redirect != nil {
		if follow := t.redirect.follows(res); follow != nil {
			_ = res.Body.Close()
			e.upstreamError(rw, out, follow)
			return false
		}
	}
	if t.ex.headers != nil {
		t.ex.headers.ApplyResponse(res.Header, true)
		t.ex.headers.Responded = true
	}
	if t.encode != nil {
		t.encode(res.Header)
	}
	return true
}

// copyBody copies the response body to rw, flushing after every write when
// the response has no length or is an event stream (Envoy streams them); a
// response with a length leaves through the connection's buffer.
func (e *Env) copyBody(rw http.ResponseWriter, res *http.Response) error {
	flush := res.ContentLength == -1
	if !flush {
		if ct := headerValue(res.Header, "Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
			base, _, _ := mime.ParseMediaType(ct)
			flush = base == "text/event-stream"
		}
	}
	rc := http.NewResponseController(rw)
	buf := e.copyBuffers.Get()
	defer e.copyBuffers.Put(buf)
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			if _, werr := rw.Write(buf[:n]); werr != nil {
				return werr
			}
			if flush {
				if err := rc.Flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// splice serves an upgraded (101) exchange: the 101 goes to the client on its
// hijacked connection, then bytes are copied both ways until either side ends.
func (e *Env) splice(rw http.ResponseWriter, out *http.Request, res *http.Response) {
	asked, got := upgradeOf(out.Header), upgradeOf(res.Header)
	if !isPrint(got) || !strings.EqualFold(asked, got) {
		_ = res.Body.Close()
		e.upstreamError(rw, out, fmt.Errorf("backend tried to switch protocol %q when %q was requested", got, asked))
		return
	}
	backend, ok := res.Body.(io.ReadWriteCloser)
	if !ok {
		_ = res.Body.Close()
		e.upstreamError(rw, out, errors.New("internal error: 101 switching protocols response with non-writable body"))
		return
	}
	conn, brw, err := http.NewResponseController(rw).Hijack()
	if err != nil {
		_ = backend.Close()
		e.upstreamError(rw, out, fmt.Errorf("hijack failed on protocol switch: %w", err))
		return
	}
	defer conn.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-out.Context().Done():
		case <-stop:
		}
		_ = backend.Close()
	}()
	h := rw.Header()
	for k, vv := range res.Header {
		if len(h[k]) == 0 {
			h[k] = vv // res.Header is not used again: its values need no copy
			continue
		}
		h[k] = append(h[k], vv...)
	}
	res.Header, res.Body = h, nil // res.Write writes the head only
	if err := res.Write(brw); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	errc := make(chan error, 2)
	go func() { // from the client: what brw holds of it first
		_, err := io.Copy(backend, brw)
		errc <- err
	}()
	go func() {
		_, err := io.Copy(conn, backend)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok && err == nil {
			err = cw.CloseWrite()
		}
		errc <- err
	}()
	if err := <-errc; err == nil {
		<-errc
	}
}

// upgradeOf is the protocol a message's Upgrade field names when its
// Connection field says upgrade.
func upgradeOf(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return headerValue(h, "Upgrade")
}

func isPrint(s string) bool {
	for i := range len(s) {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// headerValue is h.Get(name) for a name spelt canonically, without Get's
// canonicalisation of the name, whose check of every byte costs as much as
// the lookup.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
