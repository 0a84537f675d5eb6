package e2e

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// The global rate limit service reached through an ExtensionService (Contour's
// rateLimitService.extensionService, --rate-limit-extension-service): the real
// envoyproxy/ratelimit service behind a Service and an ExtensionService decides, its
// timeoutPolicy.response bounds the calls, and an ExtensionService created after the
// start is used once it appears.
func TestGlobalRateLimitExtensionService(t *testing.T) {
	rls := testutil.StartRateLimit(t, testutil.StartRedis(t), strings.ReplaceAll(globalServiceConfig, "shared", "extension"))
	proxy := strings.ReplaceAll(globalProxy, "shared", "extension")
	e := startWith(t, map[string]string{"backends.yaml": backends(t, "app"), "proxy.yaml": proxy}, app.RunOptions{
		RateLimit: &translate.RateLimitService{ExtensionService: &types.NamespacedName{Namespace: "infra", Name: "ratelimit"}, Domain: "contour"},
	})
	e.waitFor("gl.example.com", "/free", "app", http.StatusOK)
	// Without its ExtensionService the service cannot be reached: not failOpen, 500.
	if r := e.get("gl.example.com", "/a"); r.status != http.StatusInternalServerError {
		t.Errorf("before the ExtensionService exists: %d from %q, want 500", r.status, r.service())
	}
	// A generous timeout, never a measure of speed (the default is 100ms).
	e.write("extension.yaml", extensionManifest("infra", "ratelimit", rls.GRPCAddr, "  protocol: h2c\n  timeoutPolicy: {response: 30s}\n"))
	e.waitFor("gl.example.com", "/a", "app", http.StatusOK)
	e.wantServed("gl.example.com", "/b", 2)
	for _, path := range []string{"/a", "/b"} {
		if r := e.get("gl.example.com", path); r.status != http.StatusTooManyRequests || r.header.Get("X-Envoy-Ratelimited") != "true" {
			t.Errorf("%s over the shared limit: %d from %q; want 429 from the proxy", path, r.status, r.service())
		}
	}
	e.wantServed("gl.example.com", "/free", 3)
}
