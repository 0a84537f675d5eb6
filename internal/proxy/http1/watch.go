package http1

import (
	"errors"
	"net"
	"sync"
	"time"
)

// A client that goes away while its request is being served cancels the
// request's context, as with net/http's server, so that the upstream request
// stops too. net/http watches every request with a goroutine blocked in a
// read; here a request is watched only once it has been in the handler for
// watchAfter, which almost no request reaches: the common request pays for a
// timer reset and stop, not a goroutine and a system call.

// watchAfter is how long a request is served before its connection is
// watched for the client's going away, and before the answers to the
// pipelined requests ahead of it, held to leave with its own, are sent.
const watchAfter = 100 * time.Millisecond

// ErrClientGone is the cause of a request context cancelled because its
// client closed the connection.
var ErrClientGone = errors.New("client closed the connection")

// watcher follows one connection's current request.
type watcher struct {
	c     *conn
	timer *time.Timer

	mu       sync.Mutex
	armed    bool         // the current request may be watched
	body     *requestBody // the request's body, nil without one
	watching bool         // a read is in progress on the connection
	done     chan struct{}
	// gone is told when the client goes away, after the request's context
	// is cancelled (Response.NotifyClientGone); nil: nobody.
	gone interface{ ClientGone() }
}

// notify sets who is told that the client went away; nil: nobody.
func (w *watcher) notify(l interface{ ClientGone() }) {
	w.mu.Lock()
	w.gone = l
	w.mu.Unlock()
}

// arm starts the delay for the request being handed to the handler. A
// request whose body is still to be read is not watched: its reads see the
// client go away.
func (w *watcher) arm(body *requestBody, upgrade bool) {
	w.mu.Lock()
	w.armed, w.body = !upgrade, body
	w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(watchAfter, w.fire)
		return
	}
	w.timer.Reset(watchAfter)
}

// disarm ends the watch when the handler has returned; a read in progress
// is interrupted and waited for, so that the connection's reader is the
// serving goroutine's again.
func (w *watcher) disarm() {
	if w.timer == nil {
		return
	}
	w.timer.Stop()
	w.mu.Lock()
	w.armed, w.body, w.gone = false, nil, nil
	watching, done := w.watching, w.done
	w.mu.Unlock()
	if !watching {
		return
	}
	_ = w.c.rwc.SetReadDeadline(aLongTimeAgo)
	<-done
	_ = w.c.rwc.SetReadDeadline(time.Time{})
}

var aLongTimeAgo = time.Unix(1, 0)

func (w *watcher) fire() {
	w.mu.Lock()
	if w.armed {
		w.c.flushPending()
	}
	if !w.armed || w.watching || (w.body != nil && !w.body.done()) {
		w.mu.Unlock()
		return
	}
	w.watching, w.done = true, make(chan struct{})
	w.mu.Unlock()
	go w.watch()
}

// watch reads until the client sends more (a pipelined request: it stays in
// the buffer) or goes away (the request is cancelled).
func (w *watcher) watch() {
	_, err := w.c.br.Peek(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	// A deadline (a handler's, or requestBody.close cutting a read short)
	// is not the client going away.
	var ne net.Error
	if err != nil && w.armed && !(errors.As(err, &ne) && ne.Timeout()) {
		w.c.cancel(ErrClientGone)
		if w.gone != nil {
			w.gone.ClientGone()
		}
	}
	w.watching = false
	close(w.done)
}
