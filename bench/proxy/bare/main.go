// Command bare is the floor of a Go reverse proxy for bench/proxy: a plain
// httputil.ReverseProxy to the benchmark's backend, with pooled copy buffers
// and an upstream pool as large as Portico's, but no access log, metrics,
// timeouts or Envoy header rules. It takes portico run's command line, so
// that the benchmark can measure it as its -baseline:
//
//	go build -o /tmp/bare ./bench/proxy/bare && bench/proxy/run.sh -baseline /tmp/bare
//
// --bare selects the side (BARE_UPSTREAM=direct in the environment still selects direct):
//
//	nethttp   net/http's server and httputil.ReverseProxy (the default)
//	direct    net/http's server, forwarding with direct (direct.go) instead of
//	          http.Transport, to measure what the Transport's goroutines cost
//	fasthttp  fasthttp's server and HostClient (fast.go)
//	raw       a prototype HTTP/1.1 codec of our own on raw connections (raw.go)
//
// bench/proxy/run.sh -bare /tmp/bare -bare-sides nethttp,fasthttp,raw measures the
// sides in the same rounds as Portico and nginx (docs/dev/http1-codec.md).
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
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
	pprofAddr := fs.String("pprof-addr", "", "serve /debug/pprof here (for the benchmark's -cpuprofile)")
	mode := fs.String("bare", "nethttp", "the side: nethttp, direct, fasthttp or raw")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if os.Getenv("BARE_UPSTREAM") == "direct" {
		*mode = "direct"
	}
	target, err := backendURL(*manifests)
	if err != nil {
		return err
	}
	dir := filepath.Dir(*manifests)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	errs := make(chan error, 3)
	if *pprofAddr != "" {
		go func() { errs <- http.ListenAndServe(*pprofAddr, pprofMux()) }()
	}
	switch *mode {
	case "nethttp", "direct":
		handler := netHTTPHandler(*mode, target)
		go func() { errs <- http.ListenAndServe(*httpAddr, handler) }()
		go func() { errs <- http.ListenAndServeTLS(*httpsAddr, certFile, keyFile, handler) }()
	case "fasthttp":
		p := newFastProxy(target.Host)
		go func() { errs <- p.server().ListenAndServe(*httpAddr) }()
		go func() { errs <- p.server().ListenAndServeTLS(*httpsAddr, certFile, keyFile) }()
	case "raw":
		p := &rawProxy{backend: target.Host}
		plain, secure, err := rawListeners(*httpAddr, *httpsAddr, certFile, keyFile)
		if err != nil {
			return err
		}
		go func() { errs <- p.serve(plain) }()
		go func() { errs <- p.serve(secure) }()
	default:
		return fmt.Errorf("--bare %q: want nethttp, direct, fasthttp or raw", *mode)
	}
	return <-errs
}

func netHTTPHandler(mode string, target *url.URL) http.Handler {
	bufs := &buffers{}
	if mode == "direct" {
		return &direct{addr: target.Host, bufs: bufs}
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: maxIdlePerHost, DisableCompression: true}
	rp.BufferPool = bufs
	return rp
}

// rawListeners are the raw side's plain listener and its TLS one (HTTP/1.1 only:
// the prototype has no HTTP/2).
func rawListeners(httpAddr, httpsAddr, certFile, keyFile string) (plain, secure net.Listener, err error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	if plain, err = net.Listen("tcp", httpAddr); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	if secure, err = tls.Listen("tcp", httpsAddr, cfg); err != nil {
		plain.Close()
		return nil, nil, err
	}
	return plain, secure, nil
}

func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
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
