package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/internal/xds/xdstls"
)

// xDS carries every TLS Secret's private key: serve refuses to offer it in plaintext
// beyond this machine unless told to, and says so at every start when told.
func TestServeRefusesPlaintextXDSBeyondLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		_, err := NewServer(ServeOptions{Config: &rest.Config{Host: "https://127.0.0.1:1"}, XDSAddr: addr, AdminAddr: "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), "--managed-certificates") || !strings.Contains(err.Error(), "--xds-insecure") {
			t.Errorf("--xds-addr %s in plaintext: error %v, want a refusal naming --managed-certificates and --xds-insecure", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:8001", "[::1]:8001", "localhost:8001"} {
		if err := checkXDSSecurity(ServeOptions{XDSAddr: addr, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Errorf("--xds-addr %s (loopback) in plaintext: %v", addr, err)
		}
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := checkXDSSecurity(ServeOptions{XDSAddr: "0.0.0.0:8001", XDSInsecure: true, Logger: log}); err != nil {
		t.Fatalf("--xds-insecure: %v", err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "plaintext") {
		t.Errorf("--xds-insecure logged %q, want a warning", logs.String())
	}

	files := xdstls.Files{CertFile: "c", KeyFile: "k", CAFile: "ca"}
	for name, o := range map[string]ServeOptions{
		"managed and files":  {XDSAddr: "0.0.0.0:8001", ManagedTLS: true, XDSTLS: files},
		"managed, insecure":  {XDSAddr: "0.0.0.0:8001", ManagedTLS: true, XDSInsecure: true},
		"files and insecure": {XDSAddr: "0.0.0.0:8001", XDSTLS: files, XDSInsecure: true},
	} {
		if err := checkXDSSecurity(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := checkXDSSecurity(ServeOptions{XDSAddr: "0.0.0.0:8001", ManagedTLS: true}); err != nil {
		t.Errorf("managed certificates on 0.0.0.0: %v", err)
	}
}
