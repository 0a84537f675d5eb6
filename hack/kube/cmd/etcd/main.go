// Command etcd is a minimal single-member etcd server built on the embed package of
// go.etcd.io/etcd/server/v3, for tests: plain HTTP on loopback, one member, logs on
// stderr. It exits when it receives SIGTERM or SIGINT, or when the server fails.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "", "directory for the member's data (required)")
	listenClient := flag.String("listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to serve clients on")
	advertiseClient := flag.String("advertise-client-urls", "", "comma-separated client URLs to advertise (default: --listen-client-urls)")
	listenPeer := flag.String("listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to serve peers on (needed even for one member)")
	name := flag.String("name", "default", "member name")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	noFsync := flag.Bool("unsafe-no-fsync", false, "do not fsync: faster, loses data on a crash (fine for tests)")
	quota := flag.Int64("quota-backend-bytes", 0, "backend size limit in bytes (0: etcd's default)")
	flag.Parse()
	if *dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	if *advertiseClient == "" {
		*advertiseClient = *listenClient
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}
	cfg.LogLevel = *logLevel
	cfg.UnsafeNoFsync = *noFsync
	cfg.QuotaBackendBytes = *quota
	var err error
	if cfg.ListenClientUrls, err = parseURLs(*listenClient); err != nil {
		return fmt.Errorf("--listen-client-urls: %w", err)
	}
	if cfg.AdvertiseClientUrls, err = parseURLs(*advertiseClient); err != nil {
		return fmt.Errorf("--advertise-client-urls: %w", err)
	}
	if cfg.ListenPeerUrls, err = parseURLs(*listenPeer); err != nil {
		return fmt.Errorf("--listen-peer-urls: %w", err)
	}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", *listenClient)
	case <-time.After(time.Minute):
		e.Server.Stop()
		return fmt.Errorf("not ready after a minute")
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", s)
		return nil
	case err := <-e.Err():
		return err
	}
}

func parseURLs(s string) ([]url.URL, error) {
	var out []url.URL
	for _, p := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, nil
}
