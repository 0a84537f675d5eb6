package deploytest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/internal/testutil"
)

// ServeArgs returns the arguments of c, the controller container of a manifest (after
// its command, `portico`), with its $(VAR) references to the downward API's
// metadata.namespace expanded as the kubelet would in namespace. A reference to any
// other variable is an error (the kubelet would pass it on as it is), and so are
// arguments that do not start with serve.
func ServeArgs(c corev1.Container, namespace string) ([]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			env[e.Name] = namespace
		}
	}
	args := slices.Clone(c.Args)
	for i, a := range args {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if strings.Contains(a, "$(") {
			return nil, fmt.Errorf("argument %q refers to a variable the container does not define", a)
		}
		args[i] = a
	}
	if len(args) == 0 || args[0] != "serve" {
		return nil, fmt.Errorf("the controller's args %q do not start with serve", args)
	}
	return args, nil
}

// Serve is a `portico serve` subprocess.
type Serve struct {
	XDS   string // the xDS server, as a loopback address
	Admin string // the admin server (/readyz), as a loopback address

	cmd  *exec.Cmd
	out  *testutil.SyncBuffer
	done chan struct{}
	once sync.Once
	logs string
}

// StartServe runs bin (portico) with args (serve's, as ServeArgs returns them), each
// listening port moved to a free one (the host part kept) and the credentials of
// kubeconfig in place of the in-cluster ones. It is stopped when t ends, and its output
// logged if t failed.
func StartServe(t testing.TB, bin string, args []string, kubeconfig string) *Serve {
	t.Helper()
	args = slices.Clone(args)
	p := &Serve{out: &testutil.SyncBuffer{}, done: make(chan struct{})}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--admin-addr", "--xds-addr", "--webhook-addr":
			host, _, err := net.SplitHostPort(args[i+1])
			if err != nil {
				t.Fatalf("serve %s %s: %v", args[i], args[i+1], err)
			}
			_, port, _ := net.SplitHostPort(testutil.FreeAddr(t))
			args[i+1] = net.JoinHostPort(host, port)
			local := "127.0.0.1:" + port
			switch args[i] {
			case "--admin-addr":
				p.Admin = local
			case "--xds-addr":
				p.XDS = local
			}
		}
	}
	if p.Admin == "" || p.XDS == "" {
		t.Fatalf("serve has no --admin-addr or --xds-addr: %q", args)
	}
	p.cmd = exec.Command(bin, append(args, "--kubeconfig", kubeconfig)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if logs := p.Stop(t); t.Failed() {
			t.Logf("portico serve output:\n%s", logs)
		}
	})
	return p
}

// Ready reports whether the process runs and its /readyz answers 200.
func (p *Serve) Ready() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + p.Admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop interrupts the process (it releases its Lease on the way out), waits for it,
// and returns everything it logged.
func (p *Serve) Stop(t testing.TB) string {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			t.Errorf("portico serve did not exit within 15s of SIGINT; killing it")
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.logs = p.out.String()
	})
	return p.logs
}
