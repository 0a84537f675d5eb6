package upstream

import (
	"bufio"
	"errors"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequestHead writes a request without a body (the requests the client
// exchanges in the caller's goroutine: see inCallerGoroutine) as
// http.Request.Write would, without its allocations: the request line, Host,
// User-Agent (none when the header is there but empty, as ReverseProxy asks
// for), Content-Length: 0 for POST, PUT and PATCH, the other
// fields in name order, line breaks in values made spaces. keys is scratch
// space, returned for reuse.
func writeRequestHead(w *bufio.Writer, req *http.Request, keys []string) ([]string, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !isASCII(host) {
		var err error
		if host, err = httpguts.PunycodeHostPort(host); err != nil {
			return keys, err
		}
	}
	if !httpguts.ValidHostHeader(host) {
		return keys, errors.New("http: invalid Host header")
	}
	host = removeZone(host)
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validMethod(method) {
		return keys, errors.New("net/http: invalid method " + method)
	}
	uri := req.URL.RequestURI()
	if strings.ContainsFunc(uri, isCTL) {
		return keys, errors.New("net/http: can't write control character in Request.URL")
	}
	_, _ = w.WriteString(method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(uri)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(host)
	_, _ = w.WriteString("\r\n")
	ua := "Go-http-client/1.1"
	if v, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if ua != "" {
		writeField(w, "User-Agent", ua)
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		_, _ = w.WriteString("Content-Length: 0\r\n") // many servers expect it
	}
	keys = keys[:0]
	for k := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			writeField(w, k, v)
		}
	}
	if req.Close && !hasCloseToken(req.Header["Connection"]) {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, err := w.WriteString("\r\n")
	return keys, err
}

// writeField writes one field as net/http does: line breaks in the value
// become spaces, the value is trimmed.
func writeField(w *bufio.Writer, k, v string) {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v)
	}
	_, _ = w.WriteString(k)
	_, _ = w.WriteString(": ")
	_, _ = w.WriteString(strings.Trim(v, " \t"))
	_, _ = w.WriteString("\r\n")
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isCTL(r rune) bool { return r < ' ' || r == 0x7f }

// removeZone drops an IPv6 zone from a Host ("[fe80::1%en0]:80"), which a
// server would not understand, as net/http does.
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}

func validMethod(m string) bool {
	return len(m) > 0 && !strings.ContainsFunc(m, func(r rune) bool { return !httpguts.IsTokenRune(r) })
}

func hasCloseToken(values []string) bool {
	return httpguts.HeaderValuesContainsToken(values, "close")
}
