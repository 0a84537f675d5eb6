package gatewayapi

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// build builds the objects with the Gateway API processor.
func build(t testing.TB, docs string, extra ...runtime.Object) *dag.Graph {
	t.Helper()
	objs := append(testutil.DecodeObjects(t, docs), extra...)
	return dag.Build(store.FromObjects(objs), dag.Options{Processors: []dag.Processor{Processor{}}})
}

// tlsSecret is a valid kubernetes.io/tls Secret for hosts.
func tlsSecret(namespace, name string, hosts ...string) *corev1.Secret {
	return testutil.TLSSecret(namespace, name, testutil.SelfSigned(hosts...))
}

// describeStatuses renders the Gateway API conditions of every object, one line per
// condition set:
//
//	GatewayClass portico: Accepted=True/Accepted SupportedVersion=True/SupportedVersion
//	Gateway default/gw: Accepted=True/Accepted Programmed=True/Programmed
//	Gateway default/gw listener http: attached=1 kinds=HTTPRoute,GRPCRoute Accepted=True/Accepted ...
//	HTTPRoute default/r parent gw: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs
func describeStatuses(g *dag.Graph) []string {
	var out []string
	conds := func(cs []metav1.Condition) string {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason)
		}
		return strings.Join(parts, " ")
	}
	for _, st := range g.Statuses {
		ga := st.GatewayAPI
		if ga == nil {
			continue
		}
		name := st.Object.Namespace + "/" + st.Object.Name
		if st.Object.Namespace == "" {
			name = st.Object.Name
		}
		prefix := st.Object.Kind + " " + name
		switch {
		case ga.GatewayClass != nil:
			out = append(out, prefix+": "+conds(ga.GatewayClass.Conditions))
		case ga.Gateway != nil:
			line := prefix + ": " + conds(ga.Gateway.Conditions)
			if n := ga.Gateway.AttachedListenerSets; n != nil && *n > 0 {
				line += fmt.Sprintf(" listenerSets=%d", *n)
			}
			out = append(out, line)
			for _, l := range ga.Gateway.Listeners {
				out = append(out, describeListener(prefix, l.Name, l.AttachedRoutes, l.SupportedKinds, conds(l.Conditions)))
			}
		case ga.ListenerSet != nil:
			out = append(out, prefix+": "+conds(ga.ListenerSet.Conditions))
			for _, l := range ga.ListenerSet.Listeners {
				out = append(out, describeListener(prefix, l.Name, l.AttachedRoutes, l.SupportedKinds, conds(l.Conditions)))
			}
		case ga.Policy != nil:
			for _, a := range ga.Policy.Ancestors {
				out = append(out, fmt.Sprintf("%s ancestor %s/%s: %s", prefix, *a.AncestorRef.Namespace, a.AncestorRef.Name, conds(a.Conditions)))
			}
		case ga.Route != nil:
			for _, p := range ga.Route.Parents {
				parent := string(p.ParentRef.Name)
				if p.ParentRef.SectionName != nil {
					parent += "/" + string(*p.ParentRef.SectionName)
				}
				if p.ParentRef.Port != nil {
					parent += fmt.Sprintf(":%d", *p.ParentRef.Port)
				}
				out = append(out, fmt.Sprintf("%s parent %s: %s", prefix, parent, conds(p.Conditions)))
			}
		}
	}
	return out
}

func describeListener(prefix string, name gatewayv1.SectionName, attached int32, kinds []gatewayv1.RouteGroupKind, conds string) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k.Kind)
	}
	return fmt.Sprintf("%s listener %s: attached=%d kinds=%s %s", prefix, name, attached, strings.Join(names, ","), conds)
}

// describeGateways renders the data planes, one line per route:
//
//	default/gw :80 http foo.example.com: prefix:/ GET h1 q0 -> default/web/80*1
func describeGateways(g *dag.Graph) []string {
	var out []string
	route := func(prefix string, r *dag.Route) string {
		var conds []string
		for _, h := range r.Headers {
			conds = append(conds, fmt.Sprintf("%s%s%s", h.Name, matchOp(h.Kind), h.Value))
		}
		for _, q := range r.Query {
			conds = append(conds, fmt.Sprintf("?%s%s%s", q.Name, matchOp(q.Kind), q.Value))
		}
		action := describeClusters(r.Clusters)
		if r.InvalidBackendWeight > 0 {
			action += fmt.Sprintf(",500*%d", r.InvalidBackendWeight)
		}
		if r.PrefixRewrite != "" {
			action += " prefix-rewrite=" + r.PrefixRewrite
		}
		if r.PathRewrite != "" {
			action += " path-rewrite=" + r.PathRewrite
		}
		for _, m := range r.Mirrors {
			action += fmt.Sprintf(" mirror=%s(%d/%d)", m.Cluster.Name, m.Numerator, m.Denominator)
		}
		switch {
		case r.Redirect != nil:
			action = fmt.Sprintf("redirect %d %s://%s:%d %s%s", r.Redirect.StatusCode, r.Redirect.Scheme, r.Redirect.Hostname, r.Redirect.Port, r.Redirect.Path, r.Redirect.Prefix)
		case r.DirectStatus != 0:
			action = fmt.Sprintf("status %d", r.DirectStatus)
		}
		return fmt.Sprintf("%s: %s:%s [%s] -> %s", prefix, strings.ToLower(r.Path.Kind.String()), r.Path.Value, strings.Join(conds, " "), action)
	}
	for _, gw := range g.Gateways {
		for _, p := range gw.Ports {
			for _, vh := range p.HTTP {
				prefix := fmt.Sprintf("%s :%d http %s", gw.Name, p.Port, vh.Name)
				if len(vh.Routes) == 0 {
					out = append(out, prefix+": no routes")
				}
				for _, r := range vh.Routes {
					out = append(out, route(prefix, r))
				}
			}
			for _, svh := range p.HTTPS {
				cert := "none"
				if svh.Secret != nil {
					cert = svh.Secret.Name
				}
				for _, s := range svh.MoreSecrets {
					cert += "+" + s.Name
				}
				if cv := svh.ClientValidation; cv != nil {
					cert += fmt.Sprintf(", clients: optional=%t skip-verify=%t", cv.Optional, cv.SkipVerify)
				}
				prefix := fmt.Sprintf("%s :%d https %s (cert %s)", gw.Name, p.Port, svh.Name, cert)
				if tp := svh.TCPProxy; tp != nil {
					out = append(out, fmt.Sprintf("%s: passthrough=%t from %s -> %s", prefix, svh.Passthrough, tp.Source, describeClusters(tp.Clusters)))
				} else if len(svh.Routes) == 0 {
					out = append(out, prefix+": no routes")
				}
				for _, r := range svh.Routes {
					out = append(out, route(prefix, r))
				}
				for _, also := range svh.Also {
					for _, r := range also.Routes {
						out = append(out, route(prefix+" also "+also.Name, r))
					}
				}
			}
		}
	}
	return out
}

// describeClusters renders weighted clusters as name*weight; a cluster whose
// endpoints' certificates are verified (BackendTLSPolicy) as
// namespace/service/port[protocol sni=... names=... ca=...]*weight, with uris=...
// before ca= when it accepts URI SANs.
func describeClusters(wcs []*dag.WeightedCluster) string {
	var to []string
	for _, wc := range wcs {
		c := wc.Cluster
		name := c.Name
		if v := c.UpstreamValidation; v != nil {
			uris := ""
			if len(v.SubjectURIs) > 0 {
				uris = " uris=" + strings.Join(v.SubjectURIs, ",")
			}
			name = fmt.Sprintf("%s/%d[%s sni=%s names=%s%s ca=%s]", c.Service, c.Port, c.Protocol, v.ServerName, strings.Join(v.SubjectNames, ","), uris, v.CAName)
		}
		to = append(to, fmt.Sprintf("%s*%d", name, wc.Weight))
	}
	return strings.Join(to, ",")
}

func matchOp(k dag.StringMatchKind) string {
	if k == dag.MatchRegex {
		return "~"
	}
	return "="
}

// checkLines fails unless got holds exactly want, order aside.
func checkLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := append([]string{}, got...), append([]string{}, want...)
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
