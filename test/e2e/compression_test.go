package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// compressionBody is a compressible 4 KiB response.
var compressionBody = strings.Repeat("Portico compresses what Contour compresses. ", 100)[:4096]

// compressionBackend answers what the compression tests ask for; /stream
// sends its first line, flushes, and waits for release before the second.
func compressionBackend(t *testing.T, release chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Etag", `"v1"`)
			_, _ = io.WriteString(w, compressionBody)
		case "/small":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "tiny")
		case "/image":
			w.Header().Set("Content-Type", "image/png")
			_, _ = io.WriteString(w, compressionBody)
		case "/encoded":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Encoding", "br")
			_, _ = io.WriteString(w, compressionBody)
		case "/stream":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "first line\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "second line\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func compressionFiles(t *testing.T, release chan struct{}) map[string]string {
	return map[string]string{
		"backend.yaml": serviceManifest("z", "files", compressionBackend(t, release)),
		"proxy.yaml": `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: files, namespace: z}
spec:
  virtualhost: {fqdn: z.example.com}
  routes:
  - services: [{name: files, port: 80}]
`,
	}
}

// rawGet sends method path to e's HTTP listener with Accept-Encoding accept
// ("" for none), from a client that leaves bodies as they come.
func rawGet(t *testing.T, e *env, method, path, accept string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+e.httpAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "z.example.com"
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func decodeBody(t *testing.T, encoding string, body []byte) string {
	t.Helper()
	var r io.Reader
	switch encoding {
	case "gzip":
		z, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r = z
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		z, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		r = z
	default:
		t.Fatalf("unknown encoding %q", encoding)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", encoding, err)
	}
	return string(out)
}

func TestCompressionByDefault(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := start(t, compressionFiles(t, release))
	e.waitFor("z.example.com", "/small", "", http.StatusOK)

	resp, body := rawGet(t, e, http.MethodGet, "/text", "gzip, deflate")
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" || resp.ContentLength != -1 {
		t.Fatalf("a 4 KiB text response: Content-Encoding %q, Vary %q, length %d; want gzip, Accept-Encoding, unknown",
			resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"), resp.ContentLength)
	}
	if resp.Header.Get("Etag") != "" {
		t.Errorf("the strong ETag %q was kept on a compressed body", resp.Header.Get("Etag"))
	}
	if len(body) >= len(compressionBody) || decodeBody(t, "gzip", body) != compressionBody {
		t.Fatalf("compressed body of %d bytes does not decode to the backend's", len(body))
	}

	for _, tc := range []struct {
		name, method, path, accept string
		header                     []string
		status                     int
	}{
		{"short", http.MethodGet, "/small", "gzip", nil, 200},
		{"image", http.MethodGet, "/image", "gzip", nil, 200},
		{"encoded already", http.MethodGet, "/encoded", "gzip", nil, 200},
		{"no Accept-Encoding", http.MethodGet, "/text", "", nil, 200},
		{"gzip refused", http.MethodGet, "/text", "gzip;q=0, identity", nil, 200},
		{"HEAD", http.MethodHead, "/text", "gzip", nil, 200},
		{"304", http.MethodGet, "/text", "gzip", []string{"If-None-Match", `"v1"`}, 304},
	} {
		resp, body := rawGet(t, e, tc.method, tc.path, tc.accept, tc.header...)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if enc := resp.Header.Get("Content-Encoding"); enc == "gzip" {
			t.Errorf("%s: compressed", tc.name)
		}
		if tc.method == http.MethodGet && tc.status == 200 && tc.path != "/small" && string(body) != compressionBody {
			t.Errorf("%s: body of %d bytes is not the backend's", tc.name, len(body))
		}
	}

	// A streamed response: its first line, flushed by the backend, arrives
	// compressed before the backend writes the second.
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+"/stream", nil)
	req.Host = "z.example.com"
	req.Header.Set("Accept-Encoding", "gzip")
	sresp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	if sresp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("stream: Content-Encoding %q", sresp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(sresp.Body)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(zr)
	first, err := lines.ReadString('\n')
	if err != nil || first != "first line\n" {
		t.Fatalf("stream: first line %q, %v", first, err)
	}
	close(release)
	rest, err := io.ReadAll(lines)
	if err != nil || string(rest) != "second line\n" {
		t.Fatalf("stream: rest %q, %v", rest, err)
	}
}

func TestCompressionAlgorithms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		algorithm translate.Compression
		encoding  string
	}{
		{translate.CompressionBrotli, "br"},
		{translate.CompressionZstd, "zstd"},
		{translate.CompressionDisabled, ""},
	} {
		t.Run(string(tc.algorithm), func(t *testing.T) {
			t.Parallel()
			e := startWith(t, compressionFiles(t, make(chan struct{})), app.RunOptions{Global: translate.Global{Compression: tc.algorithm}})
			e.waitFor("z.example.com", "/small", "", http.StatusOK)
			resp, body := rawGet(t, e, http.MethodGet, "/text", "gzip, br, zstd")
			if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
				t.Fatalf("Content-Encoding %q, want %q", got, tc.encoding)
			}
			if tc.encoding == "" {
				if string(body) != compressionBody {
					t.Fatal("disabled: the body is not the backend's")
				}
				return
			}
			if decodeBody(t, tc.encoding, body) != compressionBody {
				t.Fatalf("%s body does not decode to the backend's", tc.encoding)
			}
			// A client that accepts only gzip gets the body as it is.
			if resp, _ := rawGet(t, e, http.MethodGet, "/text", "gzip"); resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("a gzip-only client got %q", resp.Header.Get("Content-Encoding"))
			}
		})
	}
}
