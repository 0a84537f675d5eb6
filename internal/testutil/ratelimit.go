package testutil

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Global rate limits are tested against the real service Envoy's rate limit protocol
// was written for, github.com/envoyproxy/ratelimit (built from its Go module by
// hack/ratelimit/build.sh), keeping its counters in a real Redis (Debian's
// redis-server package, which .ci/run installs).

// StartRedis starts redis-server on a free loopback port, with nothing saved to disk,
// and returns its address; it is stopped when the test ends. Without redis-server
// installed the test is skipped, saying how to install it, except under CI (CI set in
// the environment), where that is a failure.
func StartRedis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (Debian: apt-get install redis-server): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	addr := FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	p := startProcess(t, "redis-server", exec.Command(bin, "--bind", "127.0.0.1", "--port", port,
		"--dir", t.TempDir(), "--save", "", "--appendonly", "no", "--protected-mode", "no"))
	p.waitReady(t, "redis-server to answer PING on "+addr, func() bool { return redisPing(addr) })
	return addr
}

func redisPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "+PONG"
}

// RateLimitService is a running envoyproxy/ratelimit.
type RateLimitService struct {
	// GRPCAddr serves envoy.service.ratelimit.v3.RateLimitService.
	GRPCAddr string
	proc     *process
}

// Stop stops the service before the test ends (a service that went down).
func (s *RateLimitService) Stop() { s.proc.stop() }

// StartRateLimit starts envoyproxy/ratelimit on free loopback ports with config, the
// YAML of its descriptors (a "domain" and its "descriptors"), counting in the Redis at
// redisAddr. It is stopped when the test ends.
func StartRateLimit(t testing.TB, redisAddr, config string) *RateLimitService {
	t.Helper()
	bin := rateLimitBinary(t)
	root := t.TempDir()
	confDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr, debugAddr := FreeAddr(t), FreeAddr(t), FreeAddr(t)
	port := func(a string) string { _, p, _ := net.SplitHostPort(a); return p }
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"HOST=127.0.0.1", "PORT="+port(httpAddr),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+port(grpcAddr),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+port(debugAddr),
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"USE_STATSD=false", "LOG_LEVEL=debug", "LOG_FORMAT=text",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
	)
	p := startProcess(t, "ratelimit", cmd)
	p.waitReady(t, "the rate limit service to be healthy on "+httpAddr, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/healthcheck")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return &RateLimitService{GRPCAddr: grpcAddr, proc: p}
}

var rateLimitBuild struct {
	once sync.Once
	path string
	err  error
}

// rateLimitBinary builds (or finds cached) the rate limit service, once per process.
func rateLimitBinary(t testing.TB) string {
	t.Helper()
	rateLimitBuild.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "hack", "ratelimit", "build.sh")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			rateLimitBuild.err = fmt.Errorf("hack/ratelimit/build.sh: %v\n%s", err, stderr.String())
			return
		}
		rateLimitBuild.path = filepath.Join(strings.TrimSpace(string(out)), "ratelimit")
	})
	if rateLimitBuild.err != nil {
		t.Fatal(rateLimitBuild.err)
	}
	return rateLimitBuild.path
}

// process is a child process of a test, with its output kept for the test's log.
type process struct {
	name string
	cmd  *exec.Cmd
	out  SyncBuffer
	done chan struct{}
	once sync.Once
}

func startProcess(t testing.TB, name string, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// waitReady waits until ready holds, failing early if the process ends.
func (p *process) waitReady(t testing.TB, what string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		select {
		case <-p.done:
			t.Fatalf("%s ended while waiting for %s:\n%s", p.name, what, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 60s waiting for %s:\n%s", what, p.out.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (p *process) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}
