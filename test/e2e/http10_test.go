package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// HTTP/1.0 clients that send a Host are served, as by Contour (whose Envoy
// accepts HTTP/1.0: accept_http_10); one without a Host gets 400, as from Envoy.
func TestHTTP10Served(t *testing.T) {
	t.Parallel()
	e := start(t, compressionFiles(t, nil))
	e.waitFor("z.example.com", "/small", "", http.StatusOK)
	for _, c := range []struct {
		request string
		want    int
	}{
		{"GET /small HTTP/1.0\r\nHost: z.example.com\r\n\r\n", http.StatusOK},
		{"GET /small HTTP/1.0\r\n\r\n", http.StatusBadRequest},
	} {
		conn, err := net.DialTimeout("tcp", e.httpAddr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(conn, c.request); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: %v", c.request, err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = conn.Close()
		if res.StatusCode != c.want || (c.want == http.StatusOK && string(body) != "tiny") {
			t.Errorf("%q: %d %q, want %d", c.request, res.StatusCode, body, c.want)
		}
	}
}
