package e2e

import (
	"strings"
	"testing"
	"time"
)

const shopIngress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop}
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
  rules:
  - host: shop.localhost
    http:
      paths:
      - {path: /api, pathType: PATHTYPE, backend: {service: {name: API, port: {number: 80}}}}
`

func shop(pathType, api string) string {
	return strings.NewReplacer("PATHTYPE", pathType, "API", api).Replace(shopIngress)
}

// TestInvalidEditKeepsLastValidVersion: in run mode an edit that makes a working object
// invalid (the quickstart's `pathType: Prefix` typed `prefix`) leaves its last valid
// version serving, every route and the default backend included; its status says what is
// wrong and that the previous version still serves. Fixing it applies the fix; deleting
// it removes its routes and the log names it.
func TestInvalidEditKeepsLastValidVersion(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api", "web", "shipping"),
		"shop.yaml":     shop("Prefix", "api"),
	})
	e.waitFor("shop.localhost", "/api/orders", "api", 200)
	e.waitFor("elsewhere.localhost", "/", "web", 200)

	e.write("shop.yaml", shop("prefix", "shipping"))
	e.eventually(5*time.Second, "the invalid edit to be reported", func() bool {
		return strings.Contains(e.logs.String(), "The previous valid version of this object is still served")
	})
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "previous valid version") && !strings.Contains(line, "pathType") {
			t.Errorf("the status does not say what is wrong: %s", line)
		}
	}
	for i := 0; i < 5; i++ {
		if r := e.get("shop.localhost", "/api/orders"); r.status != 200 || r.service() != "api" {
			t.Fatalf("after the invalid edit /api answered %d from %q, want the previous version's api", r.status, r.service())
		}
		if r := e.get("elsewhere.localhost", "/"); r.status != 200 || r.service() != "web" {
			t.Fatalf("after the invalid edit the default backend answered %d from %q, want web", r.status, r.service())
		}
	}

	// The fix is served: the new version, not the kept one.
	e.write("shop.yaml", shop("Prefix", "shipping"))
	e.waitFor("shop.localhost", "/api/orders", "shipping", 200)

	// Broken again, then deleted: the deletion removes the routes, kept version included.
	e.write("shop.yaml", shop("prefix", "api"))
	e.eventually(5*time.Second, "the second invalid edit to be reported", func() bool {
		return strings.Count(e.logs.String(), "The previous valid version of this object is still served") >= 2
	})
	if r := e.get("shop.localhost", "/api/orders"); r.service() != "shipping" {
		t.Fatalf("the kept version is the last valid one (shipping), got %d from %q", r.status, r.service())
	}
	e.remove("shop.yaml")
	e.waitFor("shop.localhost", "/api/orders", "", 404)
	e.eventually(5*time.Second, "the removal to be logged", func() bool {
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(line, "object removed") && strings.Contains(line, "Ingress default/shop") {
				return true
			}
		}
		return false
	})
}

// TestNeverValidObjectIsNotServed: an object that has never been valid has no earlier
// version to fall back on: it is not served, and its status is the plain reason.
func TestNeverValidObjectIsNotServed(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api", "web"),
		"shop.yaml":     shop("prefix", "api"),
	})
	e.eventually(5*time.Second, "the invalid object to be reported", func() bool {
		return strings.Contains(e.logs.String(), "status=invalid")
	})
	if strings.Contains(e.logs.String(), "previous valid version") {
		t.Error("an object that was never valid is said to have a previous valid version")
	}
	if r := e.get("shop.localhost", "/api/orders"); r.status != 404 {
		t.Errorf("a never-valid Ingress is served: %d from %q", r.status, r.service())
	}
}

const shopRoot = `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: NAME}
spec:
  virtualhost: {fqdn: shop.localhost}
  routes:
  - match: /
    services: [{name: SERVICE, port: 80}]
`

// TestNewRootNeverTakesAWorkingHost: a root IngressRoute added for a host another root
// serves is refused; the working root keeps answering, and its status names the newcomer.
func TestNewRootNeverTakesAWorkingHost(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "api", "web"),
		"shop.yaml":     strings.NewReplacer("NAME", "shop", "SERVICE", "api").Replace(shopRoot),
	})
	e.waitFor("shop.localhost", "/", "api", 200)
	e.write("a-newcomer.yaml", strings.NewReplacer("NAME", "newcomer", "SERVICE", "web").Replace(shopRoot))
	e.eventually(5*time.Second, "the newcomer to be refused", func() bool {
		return strings.Contains(e.logs.String(), `belongs to the older IngressRoute default/shop`)
	})
	for i := 0; i < 5; i++ {
		if r := e.get("shop.localhost", "/"); r.status != 200 || r.service() != "api" {
			t.Fatalf("after a newer root claimed the host: %d from %q, want the older root's api", r.status, r.service())
		}
	}
}
