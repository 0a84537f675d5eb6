package filter

// ResponseHead is a response as body encoders see it, just before its head
// is sent: an upstream's, or a local reply (the proxy's own 404 or 503, a
// direct_response or redirect route, a filter's reply).
type ResponseHead struct {
	Status int
	// Headers are the response's final headers (route and filter changes,
	// Server included); changes here are what the client gets. An encoder
	// that changes the body's length deletes Content-Length: the response is
	// then chunked (HTTP/1.1) or framed without a length (HTTP/2).
	Headers Headers
	// EndStream reports that the response has no body: an answer to HEAD, a
	// 204 or 304, a Content-Length of 0, a local reply without a body.
	// Encoders may still change its headers; no body passes through them.
	EndStream bool
	// Local reports a response the proxy made itself; Filter names the
	// filter whose reply it is ("" for the router's own: no route, no
	// healthy upstream, direct_response, redirect, upstream failures).
	Local  bool
	Filter string
	// LocalBody is a local reply's whole body, which the proxy knows before
	// it sends the head (Envoy's encoders can buffer a body whole; the hook
	// sends the head first, so this is what they could have read).
	LocalBody string
}

// BodyWriter takes a response's body toward the client. The proxy's writer
// sends it; an encoder's writer changes what it is given and passes the
// result to the writer it wraps (next). Calls come from one goroutine.
type BodyWriter interface {
	// Write passes body bytes on; it returns len(p) unless it fails (the
	// client went away). p is not kept after Write returns.
	Write(p []byte) (int, error)
	// Flush sends what was written so far to the client now: the upstream
	// flushed (a streamed response: events, gRPC), so an encoder that holds
	// bytes back (a compressor) passes what it can on, then flushes next.
	Flush() error
	// Close ends a body that ended normally, with the response's trailers
	// (nil: none). An encoder writes what it still holds, then closes next
	// with the trailers as it wants them sent: changed, or nil once it wrote
	// them into the body. A response cut short (upstream reset, client gone)
	// is never closed: writers hold nothing the garbage collector cannot
	// take back.
	Close(trailers Headers) error
}

// BodyEncoder is implemented by filters that see or change response bodies
// and trailers (Envoy's encodeData and encodeTrailers). As in Envoy, every
// response of a route where the filter runs passes through it, local replies
// included (the filter's own too: ResponseHead.Filter says whose), except
// 1xx responses and protocol upgrades, which no encoder sees.
type BodyEncoder interface {
	// EncodeResponse runs on a response's head, in the reverse order of the
	// chain (the filter nearest the router first), after the Encoders'
	// EncodeHeaders of an upstream response. perRoute is as for Encoder. It
	// may change head.Headers. It returns the writer the body goes through,
	// which writes to next (the filters before it in the chain, then the
	// client), or nil to leave the body alone, as it must when
	// head.EndStream. next may not be written to before EncodeResponse
	// returns.
	EncodeResponse(s *Stream, perRoute any, head *ResponseHead, next BodyWriter) BodyWriter
}

// BodyEncoding reports whether some filter of the chain sees response
// bodies on a route configured by perFilter, whatever the request.
func (c *Chain) BodyEncoding(perFilter PerFilter) bool {
	return c.BodyEncodingFor(perFilter, nil)
}

// BodyEncodingFor reports whether some filter of the chain sees the response
// bodies of a request with headers h (nil: whatever they are; see Selective)
// on a route configured by perFilter.
func (c *Chain) BodyEncodingFor(perFilter PerFilter, h Headers) bool {
	if c == nil || !c.bodyEncoders {
		return false
	}
	for i := range c.entries {
		if c.encodes(i, perFilter, h) {
			return true
		}
	}
	return false
}

// EncodeResponse runs the body encoders of a route configured by perFilter
// on a response's head and returns the writer its body goes through: out,
// the proxy's own, when no encoder wraps it.
func (c *Chain) EncodeResponse(s *Stream, perFilter PerFilter, head *ResponseHead, out BodyWriter) BodyWriter {
	if c == nil || !c.bodyEncoders {
		return out
	}
	var actBuf [maxSlots + 1]int
	act := actBuf[:0] // the encoders that run, in the chain's order
	for i := range c.entries {
		if c.encodes(i, perFilter, nil) {
			act = append(act, i)
		}
	}
	if len(act) == 0 {
		return out
	}
	// Encoders see the head from the last filter to the first, as in Envoy,
	// while a filter's body goes to the writers of the filters before it,
	// which are not made yet when it runs: a slot stands for them. The first
	// encoder of the chain writes to out itself.
	slots := s.bodySlots(len(act) - 1)
	var madeBuf [maxSlots + 1]BodyWriter
	var made []BodyWriter // what each of act made of the body; nil: nothing
	if len(act) <= len(madeBuf) {
		made = madeBuf[:len(act)]
	} else {
		made = make([]BodyWriter, len(act))
	}
	for j := len(act) - 1; j >= 0; j-- {
		e := &c.entries[act[j]]
		pr, _ := e.skips(perFilter, nil)
		next := out
		if j > 0 {
			next = &slots[j-1]
		}
		if w := e.filter.(BodyEncoder).EncodeResponse(s, pr.Config, head, next); w != next {
			made[j] = w
		}
	}
	if head.EndStream {
		return out
	}
	// Join the writers from the client's end: each slot leads to the nearest
	// writer made before it in the chain.
	cur := out
	for j := range act {
		if j > 0 {
			slots[j-1].next = cur
		}
		if made[j] != nil {
			cur = made[j]
		}
	}
	return cur
}

// encodes reports whether entry i is a body encoder that runs for a request
// with headers h (nil: any) on a route configured by perFilter.
func (c *Chain) encodes(i int, perFilter PerFilter, h Headers) bool {
	e := &c.entries[i]
	if _, ok := e.filter.(BodyEncoder); !ok {
		return false
	}
	_, skip := e.skips(perFilter, h)
	return !skip
}

// maxSlots is how many body encoders after the first a response's writers
// are joined for without an allocation.
const maxSlots = 3

// bodySlot is the writer a body encoder is given before the writers it
// leads to exist; EncodeResponse points it at them once they all do.
type bodySlot struct{ next BodyWriter }

func (b *bodySlot) Write(p []byte) (int, error)  { return b.next.Write(p) }
func (b *bodySlot) Flush() error                 { return b.next.Flush() }
func (b *bodySlot) Close(trailers Headers) error { return b.next.Close(trailers) }

func (s *Stream) bodySlots(n int) []bodySlot {
	if n <= len(s.slotBuf) {
		return s.slotBuf[:n:n]
	}
	return make([]bodySlot, n)
}

// SetState keeps value with the request under key until the request ends,
// replacing what key held: what a filter's decoding learns and its encoding
// needs (the request's Accept-Encoding, whether it was gRPC-Web). Keys are
// of a type of the filter's own, so that filters never see each other's.
func (s *Stream) SetState(key, value any) {
	for i := range s.state {
		if s.state[i].key == key {
			s.state[i].value = value
			return
		}
	}
	if s.state == nil {
		s.state = s.stateBuf[:0]
	}
	s.state = append(s.state, stateEntry{key, value})
}

// State is what SetState kept under key, or nil.
func (s *Stream) State(key any) any {
	for i := range s.state {
		if s.state[i].key == key {
			return s.state[i].value
		}
	}
	return nil
}

type stateEntry struct{ key, value any }
