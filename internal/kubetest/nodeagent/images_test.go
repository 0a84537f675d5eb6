package nodeagent

import (
	"slices"
	"strings"
	"testing"
)

func TestImageLookup(t *testing.T) {
	images := imageSet(append(EchoBasicImages("/bin/echo-basic"), PorticoImage("/tmp/portico"), Image{Repository: "nginx", Binary: "/bin/nginx"}))
	for ref, want := range map[string]string{
		"registry.k8s.io/gateway-api/conformance/echo-basic:v0.1.0":               "/bin/echo-basic",
		"registry.k8s.io/gateway-api/conformance/echo-basic:v0.2.0":               "/bin/echo-basic",
		"gcr.io/k8s-staging-gateway-api/echo-basic@sha256:0123456789abcdef":       "/bin/echo-basic",
		"ghcr.io/portico-dev/portico:v0.7.0":                                      "/tmp/portico",
		"ghcr.io/portico-dev/portico":                                             "/tmp/portico",
		"docker.io/library/nginx:1.27":                                            "/bin/nginx",
		"nginx:1.27@sha256:0123456789abcdef":                                      "/bin/nginx",
		"localhost:5000/nginx:1.27":                                               "",
		"registry.k8s.io/gateway-api/conformance/echo-advanced:v0.1.0":            "",
		"registry.k8s.io/gateway-api/conformance/echo-basic-but-not-quite:v0.1.0": "",
	} {
		im, err := images.lookup(ref)
		if im.Binary != want {
			t.Errorf("lookup(%q) = %q, %v; want %q", ref, im.Binary, err, want)
		}
		if want == "" && (err == nil || !strings.Contains(err.Error(), "ghcr.io/portico-dev/portico")) {
			t.Errorf("lookup(%q): error %v, want one listing the known images", ref, err)
		}
	}
}

func TestArgv(t *testing.T) {
	im := Image{Repository: "x", Binary: "/cache/echo-basic", Entrypoint: "/echo-basic", Args: []string{"--default"}}
	for _, tc := range []struct {
		command, args, want []string
		err                 bool
	}{
		{want: []string{"/cache/echo-basic", "--default"}},
		{args: []string{}, want: []string{"/cache/echo-basic"}},
		{args: []string{"-v"}, want: []string{"/cache/echo-basic", "-v"}},
		{command: []string{"/echo-basic", "serve"}, args: []string{"-v"}, want: []string{"/cache/echo-basic", "serve", "-v"}},
		{command: []string{"echo-basic"}, want: []string{"/cache/echo-basic"}},
		{command: []string{"/bin/sh", "-c", "echo hi"}, err: true},
	} {
		got, err := im.argv(tc.command, tc.args)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("argv(%q, %q) = %q, %v; want %q (error: %v)", tc.command, tc.args, got, err, tc.want, tc.err)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "POD": "web-0"}
	for in, want := range map[string]string{
		"plain":          "plain",
		"$(A)":           "1",
		"x$(POD)y$(A)":   "xweb-0y1",
		"$(MISSING)":     "$(MISSING)",
		"$$(A)":          "$(A)",
		"$$":             "$",
		"$(A":            "$(A",
		"cost: 5$":       "cost: 5$",
		"$A and $(A)":    "$A and 1",
		"-addr=:$(PORT)": "-addr=:$(PORT)",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTail(t *testing.T) {
	log := []byte("a\nb\nc\n")
	for n, want := range map[int]string{0: "", 1: "c\n", 2: "b\nc\n", 3: "a\nb\nc\n", 10: "a\nb\nc\n"} {
		if got := string(tail(log, n)); got != want {
			t.Errorf("tail(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestBlockAddrs(t *testing.T) {
	for b, want := range map[int][2]string{1: {"10.252.0.5", "10.252.0.6"}, 64: {"10.252.1.1", "10.252.1.2"}, 1<<14 - 1: {"10.252.255.253", "10.252.255.254"}} {
		if h, p := blockAddrs(b); h != want[0] || p != want[1] {
			t.Errorf("blockAddrs(%d) = %s %s, want %v", b, h, p, want)
		}
	}
}

// TestCoveringMountsComeLast: an emptyDir mounted at /tmp would hide the agent's own
// volume directories under /tmp from the mounts made after it.
func TestCoveringMountsComeLast(t *testing.T) {
	mounts := []mount{
		{source: "/tmp/nodeagent-1/pods/p/volumes/tmp", target: "/tmp"},
		{source: "/tmp/nodeagent-1/pods/p/volumes/certs", target: "/certs"},
		{source: "/tmp/nodeagent-1/pods/p/volumes/config", target: "/config"},
	}
	got := coveringLast(mounts)
	if got[len(got)-1].target != "/tmp" || len(got) != 3 {
		t.Errorf("mount order %v: /tmp must come last", got)
	}
}
