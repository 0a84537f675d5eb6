package hcm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/portico-dev/portico/internal/proxy/router"
)

// maxMirroredBody bounds the request body kept in memory to be sent to the
// mirrors as well: a larger body goes to the route's cluster only.
const maxMirroredBody = 1 << 20

// maxMirrorsInFlight bounds the copies under way at once: a slow mirror must
// not pile up goroutines and memory; beyond it copies are dropped (counted).
const maxMirrorsInFlight = 512

// mirrorTimeout bounds a copy whose route has no timeout.
const mirrorTimeout = router.DefaultRouteTimeout

// mirror sends copies of a forwarded request to the route's mirrors, drawn
// per request, as Envoy shadows them: the request as it goes upstream (path
// and Host rewritten, edge headers set), its Host with "-shadow" appended,
// sent in the background and its answer dropped. A request body is read
// first (up to maxMirroredBody, then r.Body reads it again); a larger one
// is not copied.
func (h *Handler) mirror(r *http.Request, fa *router.ForwardAction, t *upstreamTarget) {
	var picked []*router.MirrorPolicy
	for i := range fa.Mirrors {
		m := &fa.Mirrors[i]
		if m.Of == 0 || router.RandUint64N(m.Of) < m.Fraction {
			picked = append(picked, m)
		}
	}
	if len(picked) == 0 {
		return
	}
	var body []byte
	if requestHasBody(r) {
		buf, err := io.ReadAll(io.LimitReader(r.Body, maxMirroredBody+1))
		r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
		if err != nil || len(buf) > maxMirroredBody {
			h.env.metrics.mirrored("skipped_body_too_large")
			return
		}
		body = buf
	}
	timeout := fa.Timeout
	if timeout <= 0 {
		timeout = mirrorTimeout
	}
	for _, m := range picked {
		req, err := h.mirrorRequest(r, t, m, body)
		if err != nil {
			h.env.metrics.mirrored("skipped_error")
			continue
		}
		if !h.env.mirrors.tryAcquire() {
			h.env.metrics.mirrored("skipped_too_many_in_flight")
			continue
		}
		go h.sendMirror(req, m.Cluster, timeout)
	}
}

// mirrorRequest is the copy of r for m; its context is the request's without
// its cancellation: the copy outlives the request it copies.
func (h *Handler) mirrorRequest(r *http.Request, t *upstreamTarget, m *router.MirrorPolicy, body []byte) (*http.Request, error) {
	host := t.host
	if !m.KeepHost {
		host = router.StripPort(host) + "-shadow"
	}
	url := "http://" + host + t.path
	if t.rawQuery != "" {
		url += "?" + t.rawQuery
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	req.Host = host
	req.Header = r.Header.Clone()
	removeHopByHop(req.Header)
	req.Header.Del("X-Forwarded-Client-Cert")
	if t.xff != "" {
		req.Header.Set("X-Forwarded-For", t.xff)
	}
	req.Header.Set("X-Forwarded-Proto", t.scheme)
	if t.requestID != "" {
		req.Header.Set("X-Request-Id", t.requestID)
	}
	if rh := t.ex.headers; rh != nil {
		// The copy carries the route's request header changes, as in Envoy
		// (applyRequest is called again for the request itself afterwards).
		rh.ApplyRequest(req.Header)
	}
	return req, nil
}

func (h *Handler) sendMirror(req *http.Request, cluster string, timeout time.Duration) {
	defer h.env.mirrors.release()
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	client, err := h.env.filterEnv.Upstreams.HTTP(cluster)
	if err == nil {
		var resp *http.Response
		if resp, err = client.Do(req.WithContext(ctx)); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	switch {
	case err == nil:
		h.env.metrics.mirrored("sent")
	case errors.Is(err, context.DeadlineExceeded):
		h.env.metrics.mirrored("timeout")
	default:
		h.env.metrics.mirrored("error")
	}
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// inFlight bounds concurrent work: tryAcquire fails instead of waiting.
type inFlight chan struct{}

func (f inFlight) tryAcquire() bool {
	select {
	case f <- struct{}{}:
		return true
	default:
		return false
	}
}

func (f inFlight) release() { <-f }
