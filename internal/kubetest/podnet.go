package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// PodSubnet is the private range used only by the pod networks these tests create:
// 10.251.<n>.0/30 per network, host side .1, pod side .2.
const PodSubnet = "10.251.0.0/16"

// PodNetwork is a network namespace joined to the host by a veth pair, standing in for
// a pod network: the API server refuses loopback endpoint addresses, as in a real
// cluster, so backends listen on the namespace's address instead. Needs root and
// iproute2 (CI runs as root).
type PodNetwork struct {
	Name   string // network namespace
	HostIP string
	PodIP  string

	mu    sync.Mutex
	procs []*exec.Cmd
}

// NewPodNetwork creates pod network n (0-255) for the test and removes it at cleanup.
func NewPodNetwork(t testing.TB, n int) *PodNetwork {
	t.Helper()
	p := &PodNetwork{
		Name:   fmt.Sprintf("portico-%d-%d", os.Getpid(), n),
		HostIP: fmt.Sprintf("10.251.%d.1", n),
		PodIP:  fmt.Sprintf("10.251.%d.2", n),
	}
	hostIf, podIf := fmt.Sprintf("pth%d-%d", os.Getpid()%10000, n), "eth0"
	tmpIf := fmt.Sprintf("ptp%d-%d", os.Getpid()%10000, n)
	steps := [][]string{
		{"netns", "add", p.Name},
		{"link", "add", hostIf, "type", "veth", "peer", "name", tmpIf},
		{"link", "set", tmpIf, "netns", p.Name},
		{"netns", "exec", p.Name, "ip", "link", "set", tmpIf, "name", podIf},
		{"addr", "add", p.HostIP + "/30", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"netns", "exec", p.Name, "ip", "addr", "add", p.PodIP + "/30", "dev", podIf},
		{"netns", "exec", p.Name, "ip", "link", "set", podIf, "up"},
		{"netns", "exec", p.Name, "ip", "link", "set", "lo", "up"},
	}
	t.Cleanup(func() {
		p.stopAll()
		_ = exec.Command("ip", "link", "del", hostIf).Run()
		_ = exec.Command("ip", "netns", "del", p.Name).Run()
	})
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("pod network: ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return p
}

// Start runs a command inside the pod network until the test ends.
func (p *PodNetwork) Start(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.Name, name}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("pod network %s: %s: %v", p.Name, name, err)
	}
	p.mu.Lock()
	p.procs = append(p.procs, cmd)
	p.mu.Unlock()
}

func (p *PodNetwork) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	p.procs = nil
}
