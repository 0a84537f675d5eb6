package echo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Request headers that let a test steer the response. They are part of the
// contract with the end-to-end tests, so they are exported constants.
const (
	// HeaderStatus asks for a specific status code (100..599).
	HeaderStatus = "X-Echo-Status"
	// HeaderDelay asks the server to wait (a Go duration such as "250ms")
	// before answering.
	HeaderDelay = "X-Echo-Delay"
)

// MaxDelay caps X-Echo-Delay so that a typo such as "1h" cannot wedge a test
// run or a graceful shutdown.
const MaxDelay = 60 * time.Second

// Response is the JSON body returned for every successfully parsed request.
// It is exported so that tests in other packages can decode it.
type Response struct {
	Service   string `json:"service"`
	Namespace string `json:"namespace"`
	// Endpoint is the address the server is actually bound to, so tests can
	// tell which backend endpoint the proxy picked.
	Endpoint string `json:"endpoint"`
	// Path is the escaped path as sent on the wire (URL.EscapedPath), without
	// the query, so tests can check that the proxy did not re-encode it
	// (e.g. "%2F" stays "%2F" instead of becoming "/").
	Path   string `json:"path"`
	Query  string `json:"query"`
	Host   string `json:"host"`
	Method string `json:"method"`
	// Proto is net/http's Request.Proto, e.g. "HTTP/1.1" or "HTTP/2.0".
	Proto string `json:"proto"`
	TLS   bool   `json:"tls"`
	// Headers maps canonical header names to all their values. Host is not
	// included; it is reported in Host.
	Headers map[string][]string `json:"headers"`
}

// handler answers every request with a Response describing it.
type handler struct {
	service   string
	namespace string
	endpoint  string
	log       *slog.Logger
}

// directives are the parsed steering headers of one request.
type directives struct {
	status int
	delay  time.Duration
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Validate everything before waiting, so a bad header fails fast.
	d, err := parseDirectives(r.Header)
	if err != nil {
		h.log.Debug("rejecting echo request", "path", r.URL.Path, "error", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if d.delay > 0 {
		h.log.Debug("delaying echo response", "path", r.URL.Path, "delay", d.delay)
	}
	if err := wait(r.Context(), d.delay); err != nil {
		// Either the client went away (nobody reads this) or the server is
		// shutting down (the client learns why it got no echo).
		http.Error(w, "echo: delay aborted: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	h.write(w, r, d.status)
}

// write sends the echo body with the requested status.
func (h *handler) write(w http.ResponseWriter, r *http.Request, status int) {
	body, err := json.Marshal(h.describe(r))
	if err != nil {
		// Cannot happen for these field types; still fail loudly, not silently.
		http.Error(w, "echo: encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')

	if isInformational(status) {
		// A 1xx cannot be a final response; send it as an interim response
		// so proxies' handling of 1xx can be tested, then answer normally.
		w.WriteHeader(status)
		status = http.StatusOK
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	if !bodyAllowed(status) {
		w.WriteHeader(status)
		return
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		h.log.Debug("writing echo response", "error", err)
	}
}

// describe builds the Response for r.
func (h *handler) describe(r *http.Request) Response {
	return Response{
		Service:   h.service,
		Namespace: h.namespace,
		Endpoint:  h.endpoint,
		Path:      r.URL.EscapedPath(),
		Query:     r.URL.RawQuery,
		Host:      r.Host,
		Method:    r.Method,
		Proto:     r.Proto,
		TLS:       r.TLS != nil,
		Headers:   r.Header.Clone(),
	}
}

// parseDirectives reads X-Echo-Status and X-Echo-Delay.
func parseDirectives(h http.Header) (directives, error) {
	d := directives{status: http.StatusOK}
	if v := h.Get(HeaderStatus); v != "" {
		s, err := parseStatus(v)
		if err != nil {
			return d, fmt.Errorf("invalid %s header %q: %w", HeaderStatus, v, err)
		}
		d.status = s
	}
	if v := h.Get(HeaderDelay); v != "" {
		delay, err := parseDelay(v)
		if err != nil {
			return d, fmt.Errorf("invalid %s header %q: %w", HeaderDelay, v, err)
		}
		d.delay = delay
	}
	return d, nil
}

func parseStatus(v string) (int, error) {
	s, err := strconv.Atoi(v)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if s < 100 || s > 599 {
		return 0, fmt.Errorf("status %d outside 100..599", s)
	}
	if s == http.StatusSwitchingProtocols {
		// A final 101 tells the client the connection now speaks another
		// protocol, which this server cannot do.
		return 0, errors.New("101 Switching Protocols is not supported")
	}
	return s, nil
}

func parseDelay(v string) (time.Duration, error) {
	delay, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("not a Go duration (e.g. 250ms)")
	}
	if delay < 0 {
		return 0, errors.New("negative duration")
	}
	return min(delay, MaxDelay), nil
}

// wait sleeps for d, returning early with ctx's error when the client goes
// away or the server shuts down.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func isInformational(status int) bool {
	return status >= 100 && status <= 199
}

// bodyAllowed reports whether HTTP permits a body with status; net/http
// refuses writes otherwise.
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && !isInformational(status)
}
