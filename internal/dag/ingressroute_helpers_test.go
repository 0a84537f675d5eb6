package dag

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	"github.com/portico-dev/portico/internal/store"
)

func ir(t testing.TB, doc string) *ingressroutev1.IngressRoute {
	return fromYAML[ingressroutev1.IngressRoute](t, doc)
}

func certDelegation(t testing.TB, doc string) *ingressroutev1.TLSCertificateDelegation {
	return fromYAML[ingressroutev1.TLSCertificateDelegation](t, doc)
}

func buildWith(opts Options, objs ...runtime.Object) *Graph {
	return Build(store.FromObjects(objs), opts)
}

// irRoute is a compact, comparable picture of a graph route of an IngressRoute.
type irRoute struct {
	// Match is the prefix; other kinds than StringPrefix are spelled out ("Prefix /x").
	Match string
	// To is the cluster name, "name=weight ..." for several clusters, "503" for a direct
	// status, or "https" for a redirect.
	To string
	// Source is namespace/name of the declaring object.
	Source string
}

func viewIRRoutes(routes []*Route) []irRoute {
	var out []irRoute
	for _, r := range routes {
		v := irRoute{Match: r.Path.Value, Source: r.Source.Namespace + "/" + r.Source.Name}
		if r.Path.Kind != PathStringPrefix {
			v.Match = r.Path.Kind.String() + " " + r.Path.Value
		}
		switch {
		case r.HTTPSRedirect:
			v.To = "https"
			if len(r.Clusters) > 0 || r.DirectStatus != 0 {
				v.To += "+clusters!"
			}
		case r.DirectStatus != 0:
			v.To = fmt.Sprint(r.DirectStatus)
			if len(r.Clusters) > 0 {
				v.To += "+clusters!"
			}
		case len(r.Clusters) == 1 && r.Clusters[0].Weight == 1:
			v.To = r.Clusters[0].Cluster.Name
		default:
			var parts []string
			for _, wc := range r.Clusters {
				parts = append(parts, fmt.Sprintf("%s=%d", wc.Cluster.Name, wc.Weight))
			}
			v.To = strings.Join(parts, " ")
		}
		out = append(out, v)
	}
	return out
}

// httpRoutes returns the routes of the plain-HTTP virtual host, nil when there is none.
func httpRoutes(g *Graph, host string) []irRoute {
	if vh := httpHost(g, host); vh != nil {
		return viewIRRoutes(vh.Routes)
	}
	return nil
}

func httpHost(g *Graph, host string) *VirtualHost {
	for _, vh := range g.HTTP {
		if vh.Name == host {
			return vh
		}
	}
	return nil
}

func httpsHost(g *Graph, host string) *SecureVirtualHost {
	for _, svh := range g.HTTPS {
		if svh.Name == host {
			return svh
		}
	}
	return nil
}

func httpsRoutes(g *Graph, host string) []irRoute {
	if svh := httpsHost(g, host); svh != nil {
		return viewIRRoutes(svh.Routes)
	}
	return nil
}

// irStatus returns the status of an IngressRoute, failing the test unless there is
// exactly one.
func irStatus(t testing.TB, g *Graph, namespace, name string) Status {
	t.Helper()
	var found []Status
	for _, s := range g.Statuses {
		if s.Object == (ObjectRef{Kind: KindIngressRoute, Namespace: namespace, Name: name}) {
			found = append(found, *s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("IngressRoute %s/%s has %d statuses, want 1: %+v", namespace, name, len(found), found)
	}
	return found[0]
}

// wantStatus checks an IngressRoute's status value and that its description contains
// every one of parts.
func wantStatus(t testing.TB, g *Graph, namespace, name string, want StatusValue, parts ...string) Status {
	t.Helper()
	s := irStatus(t, g, namespace, name)
	if s.Status != want {
		t.Errorf("%s/%s: status = %s (%q), want %s", namespace, name, s.Status, s.Description, want)
	}
	for _, p := range parts {
		if !strings.Contains(s.Description, p) {
			t.Errorf("%s/%s: description %q does not contain %q", namespace, name, s.Description, p)
		}
	}
	return s
}

// hostNames lists the names of the plain-HTTP and TLS virtual hosts.
func hostNames(g *Graph) (http, https []string) {
	for _, vh := range g.HTTP {
		http = append(http, vh.Name)
	}
	for _, svh := range g.HTTPS {
		https = append(https, svh.Name)
	}
	return http, https
}
