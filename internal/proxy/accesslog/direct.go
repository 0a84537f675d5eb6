package accesslog

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// NewLogger returns a logger that writes to w as slog's JSONHandler (json) or
// TextHandler would with the given level, and that the access log recognises:
// it formats its request lines itself, byte for byte as that handler would,
// without slog's generic attribute handling (a record of 18 attributes, each
// value's kind switched on, copied and checked), which costs more than the
// rest of the line's work on the request path's core. Any other record, and
// every record of a logger derived with With or WithGroup, goes through
// slog's handler.
func NewLogger(w io.Writer, json bool, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	lw := &lockedWriter{w: w}
	d := &directHandler{w: lw, json: json}
	if json {
		d.invalidUTF8 = jsonInvalidUTF8()
		d.Handler = slog.NewJSONHandler(lw, opts)
	} else {
		d.Handler = slog.NewTextHandler(lw, opts)
	}
	return slog.New(d)
}

// lockedWriter serialises the writes of slog's handler and of the access log
// to the writer, one line each, as a slog handler alone would.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// directHandler is the handler of NewLogger's loggers: slog's, plus what the
// access log needs to write the same lines itself. Attributes added with
// WithAttrs are kept as slog formats them (the CLI's access logger has
// component=proxy); WithGroup returns slog's handler, so a logger with a group
// is never mistaken for one the access log may write to directly.
type directHandler struct {
	slog.Handler
	w    *lockedWriter
	json bool
	// withAttrs are the attributes added with WithAttrs, and attrs what slog
	// writes of them, after the message.
	withAttrs []slog.Attr
	attrs     string
	// invalidUTF8 is what slog's JSON handler writes for a byte that is not
	// UTF-8: the escape \ufffd, or U+FFFD itself where Go's encoding/json v2
	// is built in (GOEXPERIMENT=jsonv2, on in this project's Go).
	invalidUTF8 string
}

// WithAttrs returns slog's handler with attrs, as a directHandler that
// writes them as slog does.
func (d *directHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return d
	}
	all := append(slices.Clip(d.withAttrs), attrs...)
	return &directHandler{Handler: d.Handler.WithAttrs(attrs), w: d.w, json: d.json,
		withAttrs: all, attrs: renderedAttrs(all, d.json), invalidUTF8: d.invalidUTF8}
}

// renderedAttrs is what slog's handler of the format writes of attributes
// added with WithAttrs: those of a record with nothing but a message, less
// the level and message.
func renderedAttrs(attrs []slog.Attr, json bool) string {
	var b bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&b, nil)
	prefix, suffix := "level=INFO msg=m", "\n"
	if json {
		h = slog.NewJSONHandler(&b, nil)
		prefix, suffix = `{"level":"INFO","msg":"m"`, "}\n"
	}
	_ = h.WithAttrs(attrs).Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0))
	out := b.String()
	return strings.TrimSuffix(strings.TrimPrefix(out, prefix), suffix)
}

// jsonInvalidUTF8 asks slog's JSON handler how it writes invalid UTF-8: the
// choice is made when Go is built and is not exposed otherwise.
func jsonInvalidUTF8() string {
	var b bytes.Buffer
	_ = slog.NewJSONHandler(&b, nil).Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, "\xff", 0))
	if bytes.Contains(b.Bytes(), []byte(`\ufffd`)) {
		return `\ufffd`
	}
	return "\ufffd"
}

// lineWriter appends access log lines in the format of a directHandler.
type lineWriter struct {
	buf         []byte
	json        bool
	attrs       string // directHandler.attrs
	invalidUTF8 string // directHandler.invalidUTF8
	stamp       stampCache
}

// start begins a line with slog's built-in attributes: the time (left out
// when zero, as slog does), the level and the message.
func (l *lineWriter) start(t time.Time, msg string) {
	l.buf = l.buf[:0]
	if l.json {
		l.buf = append(l.buf, '{')
		if !t.IsZero() {
			l.buf = append(l.buf, `"time":"`...)
			l.buf = l.stamp.appendRFC3339Nano(l.buf, t)
			l.buf = append(l.buf, `",`...)
		}
		l.buf = append(l.buf, `"level":"INFO","msg":`...)
		l.quoteJSON(msg)
		l.buf = append(l.buf, l.attrs...)
		return
	}
	if !t.IsZero() {
		l.buf = append(l.buf, "time="...)
		l.buf = l.stamp.appendRFC3339Millis(l.buf, t)
		l.buf = append(l.buf, ' ')
	}
	l.buf = append(l.buf, "level=INFO msg="...)
	l.text(msg)
	l.buf = append(l.buf, l.attrs...)
}

// key starts an attribute whose key needs no quoting or escaping (the access
// log's keys are fixed).
func (l *lineWriter) key(k string) {
	if l.json {
		l.buf = append(l.buf, ',', '"')
		l.buf = append(l.buf, k...)
		l.buf = append(l.buf, '"', ':')
		return
	}
	l.buf = append(l.buf, ' ')
	l.buf = append(l.buf, k...)
	l.buf = append(l.buf, '=')
}

func (l *lineWriter) str(k, v string) {
	l.key(k)
	if l.json {
		l.quoteJSON(v)
	} else {
		l.text(v)
	}
}

func (l *lineWriter) int(k string, v int64) {
	l.key(k)
	l.buf = strconv.AppendInt(l.buf, v, 10)
}

// float writes a float as slog does: strconv's shortest 'g' form in text, and
// in JSON encoding/json's form, which for the magnitudes json writes without
// an exponent (1e-6 to 1e21, and 0) is the shortest 'f' form.
func (l *lineWriter) float(k string, v float64) {
	l.key(k)
	if !l.json {
		l.buf = strconv.AppendFloat(l.buf, v, 'g', -1, 64)
		return
	}
	if a := abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		l.buf = appendJSONFloatExp(l.buf, v)
		return
	}
	l.buf = strconv.AppendFloat(l.buf, v, 'f', -1, 64)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// appendJSONFloatExp writes a float encoding/json writes with an exponent:
// the shortest 'e' form, its exponent's leading zero dropped (e-07 → e-7).
func appendJSONFloatExp(b []byte, v float64) []byte {
	b = strconv.AppendFloat(b, v, 'e', -1, 64)
	if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// end finishes the line.
func (l *lineWriter) end() {
	if l.json {
		l.buf = append(l.buf, '}')
	}
	l.buf = append(l.buf, '\n')
}

// text writes a string value as slog's TextHandler does: as it is unless it
// needs quoting, then Go-quoted.
func (l *lineWriter) text(s string) {
	if textNeedsQuoting(s) {
		l.buf = strconv.AppendQuote(l.buf, s)
		return
	}
	l.buf = append(l.buf, s...)
}

// textNeedsQuoting is slog's TextHandler's rule: empty, a space, '=', a
// character JSON would escape (but a backslash), invalid UTF-8, or a rune
// that is a space or not printable.
func textNeedsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if quotedASCII[b] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// quotedASCII holds the ASCII bytes that make textNeedsQuoting quote a value
// (a table: every byte of every line's values is looked up).
var quotedASCII = func() (t [utf8.RuneSelf]bool) {
	for b := range byte(utf8.RuneSelf) {
		t[b] = b != '\\' && (b == ' ' || b == '=' || !jsonSafe(b))
	}
	return t
}()

// jsonSafe reports whether an ASCII byte stands for itself in a JSON string.
func jsonSafe(b byte) bool { return b >= 0x20 && b != '"' && b != '\\' }

const hexDigits = "0123456789abcdef"

// quoteJSON writes a JSON string as slog's JSONHandler does: HTML characters
// left alone, invalid UTF-8 as that handler writes it, U+2028 and U+2029
// escaped.
func (l *lineWriter) quoteJSON(s string) {
	b := append(l.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe(c) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, l.invalidUTF8...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	l.buf = append(b, '"')
}

// stampCache formats the times of a writer's lines. Formatting a whole time
// took a fifth of a line's cost; lines come many to a second, and all but the
// fraction is the same for a second (in one location: offsets change on whole
// seconds), so that part is formatted once per second.
type stampCache struct {
	sec  int64
	loc  *time.Location // nil until the first time (a time's Location is never nil)
	head []byte         // "2006-01-02T15:04:05"
	zone []byte         // "Z07:00"
}

// parts returns t's date and time to the second, and its zone.
func (c *stampCache) parts(t time.Time) (head, zone []byte) {
	if sec, loc := t.Unix(), t.Location(); sec != c.sec || loc != c.loc {
		c.head = t.AppendFormat(c.head[:0], "2006-01-02T15:04:05")
		c.zone = t.AppendFormat(c.zone[:0], "Z07:00")
		c.sec, c.loc = sec, loc
	}
	return c.head, c.zone
}

// appendRFC3339Millis writes a time as slog's TextHandler does: RFC 3339 with
// exactly three digits of milliseconds, truncated.
func (c *stampCache) appendRFC3339Millis(b []byte, t time.Time) []byte {
	head, zone := c.parts(t)
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, head...)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, zone...)
}

// appendRFC3339Nano writes a time as time.RFC3339Nano does (slog's
// JSONHandler's): nanoseconds without their trailing zeros, none at all on a
// whole second.
func (c *stampCache) appendRFC3339Nano(b []byte, t time.Time) []byte {
	head, zone := c.parts(t)
	b = append(b, head...)
	if ns := t.Nanosecond(); ns != 0 {
		var digits [10]byte
		digits[0] = '.'
		for i := 9; i > 0; i-- {
			digits[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for digits[n-1] == '0' {
			n--
		}
		b = append(b, digits[:n]...)
	}
	return append(b, zone...)
}

// requestLine appends e's line, the attributes in the order write gives them
// to slog; routed is where it was routed.
func (l *lineWriter) requestLine(e *Entry, routed *Route) {
	l.start(e.Time, "access")
	l.str("listener", e.Listener)
	l.str("method", e.Method)
	l.str("authority", e.Authority)
	l.str("path", e.URL.RequestURI())
	l.str("proto", e.Proto)
	l.int("status", int64(e.Status))
	l.float("duration_ms", durationMillis(e.Elapsed))
	l.int("bytes", e.Bytes)
	l.str("upstream_cluster", e.Cluster)
	l.str("upstream_service", e.Service)
	l.str("upstream_host", e.UpstreamHost)
	l.int("attempts", int64(e.Attempts))
	l.str("request_id", e.RequestID)
	l.routed(routed)
	l.str("downstream_remote_address", e.RemoteAddr)
	if e.UpstreamErr != nil {
		l.str("upstream_error", e.UpstreamErr.Error())
	}
	if e.Details != "" {
		l.str("response_code_details", e.Details)
	}
	l.end()
}

// durationMillis is an access log line's duration_ms: milliseconds with
// microseconds' precision.
func durationMillis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
