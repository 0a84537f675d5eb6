package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestGatewayAPIExample runs examples/gateway-api as its run.sh and docs/gateway-api.md's
// walk-through do, with the backends on ephemeral ports instead of 9101-9103 and the
// Gateway's port 80 moved to a free port by --gateway-port-offset: the weighted and
// header-matched store routes, the prefix rewrite with its added response header, the
// redirect, and a 404 for a host no route has.
func TestGatewayAPIExample(t *testing.T) {
	t.Parallel()
	const dir = "../../examples/gateway-api/manifests"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	replace := map[string]string{
		"9101": port(t, startEcho(t, "shop", "store")),
		"9102": port(t, startEcho(t, "shop", "store-canary")),
		"9103": port(t, startEcho(t, "search", "search")),
	}
	files := map[string]string{}
	for _, en := range entries {
		b, err := os.ReadFile(filepath.Join(dir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		content := string(b)
		for from, to := range replace {
			content = strings.ReplaceAll(content, "port: "+from+"}", "port: "+to+"}")
		}
		files[en.Name()] = content
	}
	local := freeLocalPort(t)
	e := startWith(t, files, app.RunOptions{GatewayPortOffset: local - 80})
	base := "http://127.0.0.1:" + strconv.Itoa(local)

	get := func(host, path string, header ...string) (*http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		var resp *http.Response
		testutil.Eventually(t, 10*time.Second, "the Gateway's listener to answer", func() bool {
			resp, err = e.client.Do(req)
			return err == nil
		})
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	if _, body := get("store.example.com", "/", "x-canary", "always"); body["service"] != "store-canary" {
		t.Errorf("x-canary: always reached %v, want store-canary", body["service"])
	}
	seen := map[any]int{}
	for range 40 {
		_, body := get("store.example.com", "/")
		seen[body["service"]]++
	}
	if seen["store"] < 20 || seen["store"]+seen["store-canary"] != 40 {
		t.Errorf("40 requests to the 90/10 split went %v", seen)
	}
	resp, body := get("search.example.com", "/v1/items")
	if body["path"] != "/api/v1/items" || resp.Header.Get("X-Served-By") != "portico" {
		t.Errorf("/v1/items reached %v with X-Served-By %q, want /api/v1/items and portico", body["path"], resp.Header.Get("X-Served-By"))
	}
	if resp, _ := get("search.example.com", "/search"); resp.StatusCode != http.StatusFound || !strings.HasSuffix(resp.Header.Get("Location"), "/v1/search") {
		t.Errorf("/search answered %d Location %q, want 302 to /v1/search", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get("other.example.com", "/"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a host no route has answered %d, want 404", resp.StatusCode)
	}
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func freeLocalPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
