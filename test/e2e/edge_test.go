package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestEdgeHeaders checks the headers Portico sets as the first proxy a client reaches.
func TestEdgeHeaders(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "hdr"),
		"ing.yaml":      ingressManifest("hdr", "hdr.test", []pathRule{{"Prefix", "/", "hdr"}}, ""),
	})
	r := e.get("hdr.test", "/a/./b/../c?q=1", "X-Forwarded-For", "203.0.113.7", "X-Request-Id", "client-chosen")
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	h := r.echo.Headers
	if got := h["X-Forwarded-For"]; len(got) != 1 || got[0] != "203.0.113.7, 127.0.0.1" {
		t.Errorf("X-Forwarded-For = %v, want the client's address appended", got)
	}
	if got := h["X-Forwarded-Proto"]; len(got) != 1 || got[0] != "http" {
		t.Errorf("X-Forwarded-Proto = %v", got)
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	id := h["X-Request-Id"]
	if len(id) != 1 || !uuid.MatchString(id[0]) || r.header.Get("X-Request-Id") != id[0] {
		t.Errorf("X-Request-Id upstream %v, downstream %q: want one generated UUIDv4, the same on both sides", id, r.header.Get("X-Request-Id"))
	}
	if got := r.header.Get("Server"); got != "portico" {
		t.Errorf("Server = %q", got)
	}
	if r.echo.Path != "/a/c" || r.echo.Query != "q=1" {
		t.Errorf("path %q query %q, want the normalised /a/c and q=1", r.echo.Path, r.echo.Query)
	}
	if r.echo.Host != "hdr.test" {
		t.Errorf("Host upstream = %q", r.echo.Host)
	}
	// The backend's status passes through; the proxy's own answers are its own.
	if r := e.get("hdr.test", "/", "X-Echo-Status", "418"); r.status != 418 || r.service() != "hdr" {
		t.Errorf("X-Echo-Status 418: got %d from %q", r.status, r.service())
	}
}

// TestAdminEndpoints covers /healthz, /readyz and /metrics on a running instance.
func TestAdminEndpoints(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "m"),
		"ing.yaml":      ingressManifest("m", "m.test", []pathRule{{"Prefix", "/", "m"}}, ""),
	})
	e.get("m.test", "/")
	base := "http://" + e.runner.Admin().Addr()
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ready",
		"/metrics": "portico_rebuilds_total",
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %q, want 200 containing %q", path, resp.StatusCode, body, want)
		}
	}
}

// TestH2C sends HTTP/2 with prior knowledge over plain TCP, as gRPC clients and meshes do.
func TestH2C(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "h2"),
		"ing.yaml":      ingressManifest("h2", "h2.test", []pathRule{{"Prefix", "/", "h2"}}, ""),
	})
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+"/x", nil)
	req.Host = "h2.test"
	r := e.do(req, client)
	if r.status != 200 || r.proto != "HTTP/2.0" || r.service() != "h2" {
		t.Errorf("h2c: %d %s from %q", r.status, r.proto, r.service())
	}
}
