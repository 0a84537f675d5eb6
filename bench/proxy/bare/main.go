// Command bare is the floor of a Go reverse proxy for bench/proxy: a plain
// httputil.ReverseProxy to the benchmark's backend, with pooled copy buffers
// and an upstream pool as large as Portico's, but no access log, metrics,
// timeouts or Envoy header rules. It takes portico run's command line, so
// that the benchmark can measure it as its -baseline:
//
//	go build -o /tmp/bare ./bench/proxy/bare && bench/proxy/run.sh -baseline /tmp/bare
//
// With BARE_UPSTREAM=direct in its environment it forwards with direct (direct.go)
// instead of http.Transport, to measure what the Transport's goroutines cost.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "run" {
		return errors.New("usage: bare run --manifests DIR --http-addr ADDR --https-addr ADDR")
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	manifests := fs.String("manifests", "", "the benchmark's manifests (the backend's port is read from them)")
	httpAddr := fs.String("http-addr", "", "plain HTTP listener")
	httpsAddr := fs.String("https-addr", "", "TLS listener (the benchmark's tls.crt and tls.key, next to the manifests)")
	fs.String("admin-addr", "", "ignored")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	target, err := backendURL(*manifests)
	if err != nil {
		return err
	}
	bufs := &buffers{}
	var handler http.Handler
	if os.Getenv("BARE_UPSTREAM") == "direct" {
		handler = &direct{addr: target.Host, bufs: bufs}
	} else {
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.Transport = &http.Transport{MaxIdleConnsPerHost: maxIdlePerHost, DisableCompression: true}
		rp.BufferPool = bufs
		handler = rp
	}
	dir := filepath.Dir(*manifests)
	errs := make(chan error, 2)
	go func() { errs <- http.ListenAndServe(*httpAddr, handler) }()
	go func() {
		errs <- http.ListenAndServeTLS(*httpsAddr, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), handler)
	}()
	return <-errs
}

// backendURL reads the backend's port from the Endpoints the benchmark wrote.
func backendURL(manifests string) (*url.URL, error) {
	data, err := os.ReadFile(filepath.Join(manifests, "backend.yaml"))
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`port: (\d+)\}\]`).FindSubmatch(data)
	if m == nil {
		return nil, errors.New("no Endpoints port in backend.yaml")
	}
	return url.Parse("http://127.0.0.1:" + string(m[1]))
}

const (
	bufferSize = 32 << 10
	// maxIdlePerHost is Portico's upstream pool size.
	maxIdlePerHost = 1024
)

type buffers struct{ pool sync.Pool }

func (b *buffers) Get() []byte {
	if buf, ok := b.pool.Get().(*[bufferSize]byte); ok {
		return buf[:]
	}
	return make([]byte, bufferSize)
}

func (b *buffers) Put(buf []byte) {
	if len(buf) == bufferSize {
		b.pool.Put((*[bufferSize]byte)(buf))
	}
}
