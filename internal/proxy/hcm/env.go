package hcm

import (
	"log/slog"
	"strconv"
	"sync"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// Env is what the connection managers of every listener share; it
// outlives configuration swaps.
type Env struct {
	log       *slog.Logger
	metrics   *Metrics
	AccessLog *accesslog.Log
	// transport is shared by every request of every configuration so that
	// upstream connection pools survive config swaps.
	transport   *upstream.HTTP1Client
	copyBuffers copyBuffers
	// filterEnv is what HTTP filters use to reach services (authorization,
	// rate limits, JWKS); mirrors reach their clusters through it too.
	filterEnv *filter.Env
	// mirrors bounds the copies of requests sent to mirrors at once.
	mirrors inFlight
	// streams holds the streams of requests over connections that keep none
	// from one request to the next (HTTP/2's), and those HTTP/1.1
	// connections kept until they ended, for later requests to reuse.
	streams sync.Pool
}

// NewEnv returns the environment of the connection managers: their logger,
// metrics and access log, the upstream transport their reverse proxy shares,
// and what their filters (and mirrors) reach services with.
func NewEnv(log *slog.Logger, metrics *Metrics, accessLog *accesslog.Log, transport *upstream.HTTP1Client, filterEnv *filter.Env) *Env {
	e := &Env{log: log, metrics: metrics, AccessLog: accessLog, transport: transport, filterEnv: filterEnv,
		mirrors: make(inFlight, maxMirrorsInFlight)}
	return e
}

// NewHandler returns the connection manager of the listener named listener.
func (e *Env) NewHandler(listener string) *Handler {
	return &Handler{env: e, listener: listener}
}

// CodecRefused counts a request the HTTP/1.1 codec could not read and
// answered itself with status.
func (e *Env) CodecRefused(status int, reason string) {
	e.metrics.malformed.WithLabelValues(strconv.Itoa(status)).Inc()
	e.log.Debug("malformed HTTP/1.1 request", "status", status, "reason", reason)
}
