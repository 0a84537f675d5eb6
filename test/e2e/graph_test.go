package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// graphEnv serves a routing graph written by the test, for the route features that no
// manifest API reaches yet (Gateway API's are built by its own processing): the graph is
// translated, published by the xDS server and served by the embedded proxy, the rest of
// the pipeline as in `run`.
type graphEnv struct {
	t      *testing.T
	srv    *server.Server
	proxy  *proxy.Proxy
	client *http.Client
	// logs are the proxy's, access log included, as JSON lines.
	logs *syncBuffer
}

// serveGraph starts an xDS server and an embedded proxy serving g on a loopback port.
func serveGraph(t *testing.T, g *dag.Graph) *graphEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ge := &graphEnv{t: t, srv: server.New(slog.New(slog.DiscardHandler), nil), logs: &syncBuffer{}}
	ge.client = &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	served := make(chan error, 2)
	go func() { served <- ge.srv.Serve(ctx, lis) }()
	ge.proxy = proxy.New(proxy.Config{
		XDSAddress:    lis.Addr().String(),
		Logger:        slog.New(slog.NewJSONHandler(ge.logs, nil)),
		ListenerAddrs: map[string]string{translate.ListenerHTTP: "127.0.0.1:0", translate.ListenerHTTPS: "127.0.0.1:0"},
	})
	go func() { served <- ge.proxy.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-served; err != nil && ctx.Err() == nil {
				t.Errorf("serving the graph: %v", err)
			}
		}
	})
	ge.publish(g)
	return ge
}

// publish serves g and waits until the proxy has applied it.
func (ge *graphEnv) publish(g *dag.Graph) {
	ge.t.Helper()
	res, err := translate.Translate(g, translate.Options{HTTPAddress: "127.0.0.1:0", HTTPSAddress: "127.0.0.1:0"})
	if err != nil {
		ge.t.Fatal(err)
	}
	version, err := ge.srv.Publish(context.Background(), res)
	if err != nil {
		ge.t.Fatal(err)
	}
	testutil.Eventually(ge.t, 10*time.Second, "the proxy to apply version "+version, func() bool {
		applied, _ := strconv.Atoi(ge.proxy.AppliedVersion())
		want, _ := strconv.Atoi(version)
		return ge.proxy.Ready() && applied >= want
	})
}

// request sends method path with Host host and header pairs to the HTTP listener.
func (ge *graphEnv) request(method, host, path string, header ...string) result {
	ge.t.Helper()
	req, err := http.NewRequest(method, "http://"+ge.proxy.ListenerAddr(translate.ListenerHTTP)+path, nil)
	if err != nil {
		ge.t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	r, err := fetch(req, ge.client)
	if err != nil {
		ge.t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	return r
}

func (ge *graphEnv) get(host, path string, header ...string) result {
	ge.t.Helper()
	return ge.request(http.MethodGet, host, path, header...)
}

// echoCluster starts a `portico echo` backend named name and returns its cluster.
func echoCluster(t *testing.T, name string) *dag.Cluster {
	t.Helper()
	return clusterAt(name, testutil.StartEcho(t, echo.Config{Service: name, Namespace: "team"}))
}

// clusterAt is the cluster of Service team/name, port 80, with endpoints at addrs.
func clusterAt(name string, addrs ...string) *dag.Cluster {
	c := &dag.Cluster{Name: "team/" + name + "/80", Service: k8stypes.NamespacedName{Namespace: "team", Name: name}, Port: 80}
	for _, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		p, _ := strconv.Atoi(port)
		c.Endpoints = append(c.Endpoints, dag.Endpoint{Address: host, Port: int32(p)})
	}
	return c
}

// to is a route on path (a PathPrefix) to c.
func to(path string, c *dag.Cluster) *dag.Route {
	return &dag.Route{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: path}, Clusters: []*dag.WeightedCluster{{Cluster: c, Weight: 1}},
		Source: dag.ObjectRef{Kind: "HTTPRoute", Namespace: "team", Name: "routes"}}
}

// attempts returns the upstream attempts of the request with the given id, from its
// access log line, once the line is written.
func (ge *graphEnv) attempts(requestID string) int {
	ge.t.Helper()
	n := -1
	testutil.Eventually(ge.t, 10*time.Second, "the access log line of request "+requestID, func() bool {
		for _, line := range strings.Split(ge.logs.String(), "\n") {
			var entry struct {
				Msg       string `json:"msg"`
				RequestID string `json:"request_id"`
				Attempts  int    `json:"attempts"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "access" && entry.RequestID == requestID {
				n = entry.Attempts
				return true
			}
		}
		return false
	})
	return n
}

// pathAndQuery is the path and query an echo backend received.
func pathAndQuery(r result) string {
	if r.echo.Query == "" {
		return r.echo.Path
	}
	return r.echo.Path + "?" + r.echo.Query
}
