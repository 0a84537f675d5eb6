package dag

import (
	"fmt"
	"net/http"
	"strings"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// Headers that a headers policy may not name. Both data planes write these themselves
// after a route's changes, or drop them when forwarding, or frame the message with them:
// a change would be undone, or would not do the same in Envoy and in the embedded proxy.
// The object is refused instead, with what to do (docs/httpproxy.md has the table).

// headerNameProblem says what is wrong with naming the header name (as written) in a
// set (set) or remove list of a request or response headers policy, or "".
func headerNameProblem(name string, request, set bool) string {
	switch {
	case strings.HasPrefix(name, ":"):
		return pseudoHeaderRefusal(name, request)
	case !validHeaderName(name):
		return fmt.Sprintf("%q is not a valid header name", name)
	}
	return headerRefusal(http.CanonicalHeaderKey(name), request, set)
}

// headerRefusal says why a headers policy cannot set (set) or remove a header of
// requests (request) or responses, or "" when it can. name is canonical
// (http.CanonicalHeaderKey); pseudo-headers are refused before this is asked.
func headerRefusal(name string, request, set bool) string {
	switch name {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Trailer":
		return name + " is a hop-by-hop header: each data plane drops it when forwarding and writes its own for each connection, so no headers policy can set or remove it"
	case "Upgrade":
		return "Upgrade is a hop-by-hop header that no headers policy can set or remove; to let clients upgrade a route's requests to WebSocket, set enableWebsockets: true on the route"
	case "Content-Length":
		return "Content-Length is written by the data plane from the body it forwards; no headers policy can set or remove it"
	case "X-Request-Id":
		return "X-Request-Id is the request's id, which Portico generates for each request, sends upstream and returns in the response; no headers policy can set or remove it"
	case "Host":
		switch {
		case !request:
			return "Host is a request header: a response has none to set or remove"
		case !set:
			return "Host cannot be removed: every request has one; set it to rewrite it"
		}
	case "Date":
		if !request && !set {
			return "Date cannot be removed: the data plane adds one to every response that has none (it can be set)"
		}
	}
	return ""
}

// pseudoHeaderRefusal is the problem of a pseudo-header (":path") in a headers policy.
func pseudoHeaderRefusal(name string, request bool) string {
	if !request {
		return fmt.Sprintf("%q is a pseudo-header, which no headers policy can change; a route's status comes from its service or its directResponsePolicy", name)
	}
	return fmt.Sprintf("%q is a pseudo-header, which no headers policy can change; rewrite the path with pathRewritePolicy, and the authority by setting Host in requestHeadersPolicy", name)
}

// liftServerHeader makes the services' changes to the Server response header the route
// r's own. Portico's Server header is a change of the whole route configuration, which
// Envoy applies after the changes of the service a request went to and before those of
// its route (most_specific_header_mutations_wins; see translate.serverHeader): a
// service's change of Server would be overwritten, a route's is not. So a change that
// every service of r makes alike moves to r, and services that change Server
// differently make r invalid. When r changes Server itself, its change wins over theirs
// anyway (a route's changes come after its services'), and theirs are dropped.
func liftServerHeader(r *Route, services []contourv1.Service, field string, c *proxyCheck) {
	var index []int // the index in services of each of r.Clusters
	for i := range services {
		if !services[i].Mirror {
			index = append(index, i)
		}
	}
	if len(r.Clusters) == 0 || len(index) != len(r.Clusters) {
		return // no services, or one was refused: r is invalid already
	}
	ops := make([]string, len(r.Clusters))
	for i, wc := range r.Clusters {
		ops[i], wc.ResponseHeaders = takeServer(wc.ResponseHeaders)
	}
	if own, _ := takeServer(r.ResponseHeaders); own != "" {
		return
	}
	for i := range ops {
		if ops[i] != ops[0] {
			c.fail(problemRoute, "HeaderPolicyInvalid",
				"the services of %s change the Server response header differently (services[%d] %s, services[%d] %s): Portico decides Server per route: change it in %s.responseHeadersPolicy, or alike in every service of the route",
				field, index[0], describeServerOp(ops[0]), index[i], describeServerOp(ops[i]), field)
			return
		}
	}
	r.ResponseHeaders = withServerOp(r.ResponseHeaders, ops[0])
}

// takeServer takes Server out of p's changes. op says what they did to it: "" nothing,
// "-" removed it, "=VALUE" set it (a policy that does both sets it: removals come first).
// rest is nil when nothing else is left.
func takeServer(p *HeadersPolicy) (op string, rest *HeadersPolicy) {
	if p == nil {
		return "", nil
	}
	out := &HeadersPolicy{}
	for _, h := range p.Set {
		if h.Name == "Server" {
			op = "=" + h.Value
			continue
		}
		out.Set = append(out.Set, h)
	}
	for _, name := range p.Remove {
		if name == "Server" {
			if op == "" {
				op = "-"
			}
			continue
		}
		out.Remove = append(out.Remove, name)
	}
	if len(out.Set) == 0 && len(out.Remove) == 0 {
		return op, nil
	}
	return op, out
}

// withServerOp adds a takeServer op to p's changes.
func withServerOp(p *HeadersPolicy, op string) *HeadersPolicy {
	if op == "" {
		return p
	}
	if p == nil {
		p = &HeadersPolicy{}
	}
	if value, ok := strings.CutPrefix(op, "="); ok {
		p.Set = append(p.Set, HeaderValue{Name: "Server", Value: value})
	} else {
		p.Remove = append(p.Remove, "Server")
	}
	return p
}

func describeServerOp(op string) string {
	switch op {
	case "":
		return "leaves it"
	case "-":
		return "removes it"
	}
	// The value as written: the graph's is escaped for Envoy ("%" as "%%").
	return fmt.Sprintf("sets it to %q", strings.ReplaceAll(op[1:], "%%", "%"))
}
