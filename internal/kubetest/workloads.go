package kubetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/kubetest/nodeagent"
)

// Controllers are the kube-controller-manager controllers StartWorkloads runs: enough
// for Deployments to become Pods and Services to get EndpointSlices (and Endpoints),
// for owners' deletion to reach their dependents and namespace deletion to finish.
// No ServiceAccount controllers: the API server runs without the ServiceAccount
// admission plugin, so Pods need no default ServiceAccount. No node lifecycle
// controller: the node agent's Node stays as it says.
var Controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"endpointslice-controller",
	"endpoints-controller",
	"garbage-collector-controller",
	"namespace-controller",
}

// WorkloadOptions configure StartWorkloads.
type WorkloadOptions struct {
	// Images the node runs besides echo-basic (mapped by every name the Gateway API
	// conformance suite uses).
	Images []nodeagent.Image
	// PorticoBinary, when set, runs Portico's image (ghcr.io/portico-dev/portico, any
	// tag), e.g. testutil.PorticoBinary(t).
	PorticoBinary string
}

// StartWorkloads gives the Env real workloads: kube-controller-manager (started once per
// Env, stopped by Stop) and a node agent (stopped when t ends) that binds and runs Pods.
// A Deployment applied afterwards gets Pods running as local processes with their own
// IPs, Ready conditions from their probes, and EndpointSlices listing them. Needs root
// and iproute2, like NewPodNetwork; tests using it must hold /tmp/portico-kube.lock
// (see docs/dev) since the pod subnet is machine-wide.
func (e *Env) StartWorkloads(t testing.TB, opts WorkloadOptions) *nodeagent.Agent {
	t.Helper()
	e.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	begin := time.Now()
	if err := e.startControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	images := nodeagent.EchoBasicImages(filepath.Join(e.BinDir, "echo-basic"))
	if opts.PorticoBinary != "" {
		images = append(images, nodeagent.PorticoImage(opts.PorticoBinary))
	}
	images = append(images, opts.Images...)
	agent, err := nodeagent.Start(ctx, nodeagent.Options{
		Client: Clientset(t, e.Config),
		Images: images,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)
	t.Logf("kubetest: workloads ready after %v (kube-controller-manager log %s)", time.Since(begin).Round(time.Millisecond), e.ControllerManagerLog)
	return agent
}

// startControllerManager starts kube-controller-manager unless it runs already.
func (e *Env) startControllerManager(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return fmt.Errorf("kubetest: StartWorkloads after Stop")
	}
	if e.controllerManager != nil {
		select {
		case <-e.controllerManager.done:
			return fmt.Errorf("kubetest: kube-controller-manager exited: %v (log: %s)", e.controllerManager.err, e.ControllerManagerLog)
		default:
			return nil
		}
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	e.ControllerManagerLog = filepath.Join(e.Dir, "kube-controller-manager.log")
	p, err := startProc(filepath.Join(e.BinDir, "kube-controller-manager"), e.ControllerManagerLog, []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--controllers=" + strings.Join(Controllers, ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		// Its /healthz is for the readiness wait below; no delegated authentication or
		// authorization to set up for it.
		"--authorization-always-allow-paths=/healthz,/readyz,/livez",
		"--authentication-skip-lookup",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--profiling=false",
	})
	if err != nil {
		return err
	}
	e.controllerManager = p
	client := &http.Client{Transport: insecureTransport()}
	url := "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/healthz"
	return waitFor(ctx, p, "kube-controller-manager", func(ctx context.Context) bool {
		return probe(ctx, client, url, "ok")
	})
}

// insecureTransport is for the health check of a local kube-controller-manager, whose
// serving certificate is self-signed at its start.
func insecureTransport() *http.Transport {
	return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
}
