package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// The vhosts10k scenario: the same 32 keep-alive connections as c32, with every
// request for one of many virtual hosts configured next to localhost, so that
// the two scenarios differ in the size of the configuration only. Every host
// has the localhost Ingress's shape (one Prefix path to the same Service), so
// they share one cluster and one upstream pool: what grows is the route
// table, not the number of backends. nginx gets a server block per host, as
// a configuration generator writes them, with the localhost server's
// location.

// vhostName is the i-th virtual host of the scenario.
func vhostName(i int) string { return fmt.Sprintf("vh%05d.bench.test", i) }

// vhostsStride walks the hosts in a scrambled order that visits all of them
// (it is prime, so coprime with any count it does not divide): requests for
// neighbouring hosts do not follow each other.
const vhostsStride = 7919

// applyVhosts configures n virtual hosts on every side that routes by host
// and waits until each serves them: Portico's sides watch the manifests
// directory; nginx reloads on SIGHUP. Bare sides forward every request to the
// backend whatever its host and need nothing.
func (b *bench) applyVhosts(ctx context.Context, n int, sides []*side) error {
	if err := b.writeVhostsScript(n); err != nil {
		return err
	}
	manifests, err := vhostsManifests(n)
	if err != nil {
		return err
	}
	conf := b.nginxVhostsConf(n)
	if err := b.writeAtomic(filepath.Join(b.dir, "manifests", "vhosts.yaml"), manifests); err != nil {
		return err
	}
	for _, s := range sides {
		start := time.Now()
		var err error
		switch s.kind {
		case kindPortico:
			err = waitURL(ctx, s.http+"/", vhostName(n-1), filepath.Join(b.dir, s.name+".log"))
		case kindNginx:
			err = b.reloadNginx(ctx, s, conf)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("%s with %d virtual hosts: %w", s.name, n, err)
		}
		fmt.Printf("%s serves %d more virtual hosts (%.1f s)\n", s.name, n, time.Since(start).Seconds())
	}
	return nil
}

// vhostsManifests are n Ingresses, each with the localhost one's rule, no TLS.
func vhostsManifests(n int) ([]byte, error) {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = vhostName(i)
	}
	return render("vhosts.yaml", `{{range $i, $host := .}}---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: {{printf "vh%05d" $i}}, namespace: default}
spec:
  rules:
{{template "rule" $host}}{{end}}`, hosts)
}

// nginxVhostsConf is a server block per host, included at the http level. Its
// server names no longer fit the default hash.
func (b *bench) nginxVhostsConf(n int) []byte {
	var buf bytes.Buffer
	buf.WriteString("server_names_hash_max_size 65536;\nserver_names_hash_bucket_size 128;\n")
	for i := range n {
		fmt.Fprintf(&buf, "server {\n  listen 127.0.0.1:%d;\n  server_name %s;\n  %s\n}\n",
			b.ports.NginxHTTP, vhostName(i), nginxVhostLocation)
	}
	return buf.Bytes()
}

// nginxVhostLocation is the nginx location template, rendered once.
var nginxVhostLocation = func() string {
	out, err := render("vhost-location", `{{template "location"}}`, nil)
	if err != nil {
		panic(err) // a constant template
	}
	return string(out)
}()

// vhostsScript is wrk's Lua script for the virtual-host scenario. Requests are
// formatted once, in init, so that each costs wrk a table lookup: wrk shares
// its core with the backend, and a request built per call would slow every
// side's load, not the proxy.
func (b *bench) vhostsScript() string { return filepath.Join(b.dir, "vhosts.lua") }

func (b *bench) writeVhostsScript(n int) error {
	script := fmt.Sprintf(`-- Written by bench/proxy (vhosts.go): spreads requests over %[1]d virtual hosts.
local n = %[1]d
local reqs = {}
local i = 0

function init(args)
  for k = 0, n - 1 do
    reqs[k + 1] = wrk.format("GET", wrk.path, {Host = string.format("vh%%05d.bench.test", k)})
  end
end

function request()
  i = (i + %[2]d) %% n
  return reqs[i + 1]
end
`, n, vhostsStride)
	return os.WriteFile(b.vhostsScript(), []byte(script), 0o644)
}

// reloadNginx writes the virtual hosts' configuration and reloads nginx,
// waiting until its workers are new ones and the old ones have gone: until
// then the CPU of a round would be counted on processes about to exit. A
// configuration nginx refuses leaves the old workers, and the error log says
// why.
func (b *bench) reloadNginx(ctx context.Context, s *side, conf []byte) error {
	old, err := processTree(s.proc.pid())
	if err != nil {
		return err
	}
	if err := b.writeAtomic(filepath.Join(b.dir, "nginx-vhosts", "vhosts.conf"), conf); err != nil {
		return err
	}
	if err := syscall.Kill(s.proc.pid(), syscall.SIGHUP); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		now, err := processTree(s.proc.pid())
		if err != nil {
			return err
		}
		if replaced(old[1:], now[1:]) {
			return nil
		}
		if time.Now().After(deadline) || s.proc.exited() {
			return fmt.Errorf("no new workers after the reload; error log:\n%s", tail(filepath.Join(b.dir, "nginx-proxy-error.log")))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// replaced reports whether workers has at least one process and none of old.
func replaced(old, workers []int) bool {
	return len(workers) > 0 && !slices.ContainsFunc(workers, func(p int) bool { return slices.Contains(old, p) })
}

// writeAtomic writes path through a temporary file in the work directory,
// renamed over it, so that neither Portico's watcher nor nginx reads half of it
// (nor the temporary file: the work directory is neither's).
func (b *bench) writeAtomic(path string, data []byte) error {
	tmp := filepath.Join(b.dir, filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
