package proxy

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The embedded proxy is layered: the leaves import nothing of the proxy,
// upstream only the leaves, the filters only the chain contract and the
// leaves; the router sits on them, the connection manager (hcm) on the
// router, the listeners on the connection manager, and package proxy alone
// wires them together. A reader (or the
// next change) can rely on it: what a package may import is here.

// layerRules says, for each package below internal/proxy (by its path from
// there, "" for package proxy), which of the proxy's packages it may
// import; an entry ending in "/" allows every package below it. Every
// package below filters/ has the row "filters/*": a filter imports the chain
// contract and the leaves, and the engines filters share
// (filters/internal/...), never the proxy, upstream or another filter.
var layerRules = map[string][]string{
	"":                   {"*"},
	"internal/xdsconv":   {},
	"internal/layered":   {},
	"internal/xdstest":   {},
	"internal/h1corpus":  {},
	"internal/sorted":    {},
	"internal/stackgrow": {},
	"internal/rawsock":   {},
	"internal/sockpeek":  {"internal/rawsock"},
	"stats":              {},
	"accesslog":          {},
	"filter":             {},
	// The HTTP/1.1 codec: a leaf, so that both the listeners (server side)
	// and upstream (client side) use it.
	"http1":    {"internal/stackgrow"},
	"upstream": {"stats", "http1", "internal/xdsconv", "internal/sockpeek", "internal/rawsock"},
	// The router reads the route-level rate_limits of the ratelimit filter
	// (Envoy's route actions for it), not the filter itself, and names each
	// route for the access log (accesslog.Route) as it compiles it.
	"router": {"filter", "filters/ratelimit", "upstream", "accesslog", "internal/layered", "internal/xdsconv"},
	// The HTTP connection manager: the request path, down to the router.
	"hcm": {"router", "filter", "upstream", "http1", "accesslog", "stats", "internal/layered", "internal/xdsconv"},
	// Sockets, TLS and SNI chain selection, client certificates, tcp_proxy:
	// HTTP chains are handed to their connection manager.
	"listener":  {"hcm", "http1", "router", "upstream", "accesslog", "internal/xdsconv", "internal/sorted", "internal/stackgrow", "internal/sockpeek", "internal/rawsock"},
	"xdsclient": {},
	"filters/*": {"filter", "stats", "internal/xdsconv", "filters/internal/"},
}

// proxyImports returns, for each package below dir (by its path from dir),
// the packages of the proxy (by their path from dir) that its files
// import, test files left out.
func proxyImports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	const self = "github.com/portico-dev/portico/internal/proxy"
	imports := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if pkg == "." {
			pkg = ""
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if _, ok := imports[pkg]; !ok {
			imports[pkg] = nil
		}
		for _, is := range f.Imports {
			ip, _ := strconv.Unquote(is.Path.Value)
			if ip == self {
				imports[pkg] = append(imports[pkg], "")
			} else if rest, ok := strings.CutPrefix(ip, self+"/"); ok {
				imports[pkg] = append(imports[pkg], rest)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// ruleFor returns the row of layerRules that governs pkg.
func ruleFor(pkg string) ([]string, bool) {
	if r, ok := layerRules[pkg]; ok {
		return r, true
	}
	if strings.HasPrefix(pkg, "filters/") {
		return layerRules["filters/*"], true
	}
	return nil, false
}

// mayImport reports whether a row of layerRules allows importing imp.
func mayImport(allowed []string, imp string) bool {
	for _, a := range allowed {
		if a == imp || strings.HasSuffix(a, "/") && strings.HasPrefix(imp, a) {
			return true
		}
	}
	return false
}

func TestLayering(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for pkg, imported := range proxyImports(t, wd) {
		allowed, ok := ruleFor(pkg)
		if !ok {
			t.Errorf("package %q below internal/proxy has no row in layerRules: say which of the proxy's packages it may import", pkg)
			continue
		}
		if slices.Contains(allowed, "*") {
			continue
		}
		for _, imp := range imported {
			if !mayImport(allowed, imp) {
				name := imp
				if name == "" {
					name = "proxy"
				}
				t.Errorf("internal/proxy/%s imports internal/proxy/%s, which its layer may not (allowed: %v)", pkg, strings.TrimSuffix(name, "/"), allowed)
			}
		}
	}
}
