package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Subnet is the range the agent's pods take their addresses from, apart from
// kubetest.PodSubnet (10.251.0.0/16) that hand-made pod networks use: 10.252.<n>.<m>/30
// blocks, host side first, pod second. Block 0 holds the node's own address.
const Subnet = "10.252.0.0/16"

// NodeIP is the node's InternalIP and every Pod's hostIP: an address of the host's
// loopback interface, which Pods reach through their default route.
const NodeIP = "10.252.0.1"

const ipForward = "/proc/sys/net/ipv4/ip_forward"

// network hands out pod networks: a network namespace per Pod joined to the host by a
// veth pair, a /30 each, the pod's default route through the host side. The host routes
// between them (IPv4 forwarding on), so Pods, the host and other Pods reach each other.
type network struct {
	tag string // distinguishes this agent's namespaces and links from other processes'

	mu       sync.Mutex
	next     int   // next never-used block
	free     []int // released blocks
	forward  []byte
	disabled bool
}

// podNet is one Pod's network.
type podNet struct {
	block  int
	NS     string // network namespace name (ip netns)
	hostIf string
	HostIP string
	PodIP  string
}

func newNetwork(ctx context.Context) (*network, error) {
	n := &network{tag: strconv.Itoa(os.Getpid() % 100000), next: 1}
	cleanStale(ctx)
	// On the loopback interface (not every kernel has dummy interfaces): local to the
	// host, reached by Pods through their default route. "replace" takes over the
	// address from an agent killed before its cleanup.
	if err := ipCmd(ctx, "addr", "replace", NodeIP+"/32", "dev", "lo"); err != nil {
		return nil, err
	}
	old, err := os.ReadFile(ipForward)
	if err != nil {
		n.close(ctx)
		return nil, err
	}
	if strings.TrimSpace(string(old)) != "1" {
		if err := os.WriteFile(ipForward, []byte("1\n"), 0o644); err != nil {
			n.close(ctx)
			return nil, fmt.Errorf("turning on IPv4 forwarding (pods reach each other through the host): %w", err)
		}
		n.forward = old
	}
	return n, nil
}

// cleanStale removes the network namespaces of agents whose process is gone (a test
// binary killed before its cleanup): their addresses would collide with ours. Deleting a
// namespace deletes its veth pair.
func cleanStale(ctx context.Context) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "portico-na-")
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if p, err := strconv.Atoi(pid); err == nil && !alive(p) {
			_ = ipCmd(ctx, "netns", "del", e.Name())
		}
	}
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// blockAddrs returns the host and pod address of block b.
func blockAddrs(b int) (host, pod string) {
	base := netip.MustParsePrefix(Subnet).Addr().As4()
	off := b * 4
	base[2] += byte(off >> 8)
	base[3] += byte(off & 0xff)
	a := netip.AddrFrom4(base)
	return a.Next().String(), a.Next().Next().String()
}

func (n *network) allocate() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.disabled {
		return 0, errors.New("node agent stopped")
	}
	// Fresh blocks first: a new Pod does not get the address a deleted one had moments
	// ago (as a cluster's IPAM prefers), which would blur what a test sees.
	if n.next < 1<<14 {
		n.next++
		return n.next - 1, nil
	}
	if len(n.free) == 0 {
		return 0, errors.New("pod subnet " + Subnet + " exhausted")
	}
	b := n.free[0]
	n.free = n.free[1:]
	return b, nil
}

func (n *network) release(b int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.free = append(n.free, b)
}

// add creates a Pod's network.
func (n *network) add(ctx context.Context) (*podNet, error) {
	b, err := n.allocate()
	if err != nil {
		return nil, err
	}
	host, pod := blockAddrs(b)
	p := &podNet{
		block:  b,
		NS:     fmt.Sprintf("portico-na-%s-%d", n.tag, b),
		hostIf: fmt.Sprintf("nah%s-%d", n.tag, b),
		HostIP: host,
		PodIP:  pod,
	}
	tmp := fmt.Sprintf("nap%s-%d", n.tag, b)
	steps := [][]string{
		{"netns", "add", p.NS},
		{"link", "add", p.hostIf, "type", "veth", "peer", "name", tmp},
		{"link", "set", tmp, "netns", p.NS},
		{"-n", p.NS, "link", "set", tmp, "name", "eth0"},
		{"addr", "add", host + "/30", "dev", p.hostIf},
		{"link", "set", p.hostIf, "up"},
		{"-n", p.NS, "addr", "add", pod + "/30", "dev", "eth0"},
		{"-n", p.NS, "link", "set", "eth0", "up"},
		{"-n", p.NS, "link", "set", "lo", "up"},
		{"-n", p.NS, "route", "add", "default", "via", host},
	}
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			n.remove(context.WithoutCancel(ctx), p)
			return nil, err
		}
	}
	return p, nil
}

// remove deletes a Pod's network (the namespace takes its end of the veth pair, and
// the pair goes with it).
func (n *network) remove(ctx context.Context, p *podNet) {
	_ = ipCmd(ctx, "netns", "del", p.NS)
	_ = ipCmd(ctx, "link", "del", p.hostIf) // already gone unless the move into the namespace failed
	n.release(p.block)
}

func (n *network) close(ctx context.Context) {
	n.mu.Lock()
	n.disabled = true
	forward := n.forward
	n.mu.Unlock()
	_ = ipCmd(ctx, "addr", "del", NodeIP+"/32", "dev", "lo")
	if forward != nil {
		_ = os.WriteFile(ipForward, forward, 0o644)
	}
}

func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
