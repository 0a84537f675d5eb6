package deploy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/managedtls"
	"github.com/portico-dev/portico/internal/provision"
	"github.com/portico-dev/portico/internal/testutil"
)

// xdsServerName is the name Envoy dials the controller by (deploy/envoy.yaml's
// --xds-address host), which its certificate must carry.
const xdsServerName = "portico." + systemNamespace + ".svc"

// checkXDSIsMutualTLS checks a serve started with deploy/'s arguments: its xDS server
// refuses plaintext and TLS clients without a certificate, and serves one presenting
// the client certificate the controller issued into the Secret Envoy mounts, as Envoy
// and as `portico proxy` reading that Secret's files.
func checkXDSIsMutualTLS(t *testing.T, admin kubernetes.Interface, p *serveProcess) {
	t.Helper()
	var sec *corev1.Secret
	eventually(t, 30*time.Second, "the Secret "+managedtls.DefaultClientSecret+" to be created", func() bool {
		var err error
		sec, err = admin.CoreV1().Secrets(systemNamespace).Get(context.Background(), managedtls.DefaultClientSecret, metav1.GetOptions{})
		return err == nil
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		t.Fatal("the client Secret's ca.crt holds no certificate")
	}
	pair, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	withName := &tls.Config{RootCAs: pool, ServerName: xdsServerName, MinVersion: tls.VersionTLS12}

	if err := discover(p.XDS, insecure.NewCredentials()); err == nil {
		t.Error("the xDS server answered a plaintext client")
	}
	if err := discover(p.XDS, credentials.NewTLS(withName)); err == nil {
		t.Error("the xDS server answered a TLS client without a certificate")
	}
	withCert := withName.Clone()
	withCert.Certificates = []tls.Certificate{pair}
	if err := discover(p.XDS, credentials.NewTLS(withCert)); err != nil {
		t.Errorf("the xDS server refused the issued client certificate: %v", err)
	}

	// A data plane reading the Secret as mounted files, as Envoy does.
	dir := t.TempDir()
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, k), sec.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	httpAddr := testutil.FreeAddr(t)
	cmd := exec.Command(testutil.PorticoBinary(t), "proxy", "--xds-server", p.XDS,
		"--xds-tls-cert-file", filepath.Join(dir, "tls.crt"), "--xds-tls-key-file", filepath.Join(dir, "tls.key"),
		"--xds-tls-ca-file", filepath.Join(dir, "ca.crt"), "--xds-tls-server-name", xdsServerName,
		"--http-addr", httpAddr, "--https-addr", testutil.FreeAddr(t))
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("portico proxy output:\n%s", out.String())
		}
	}()
	eventually(t, 30*time.Second, "portico proxy, with the Secret's files, to get its listeners from serve", func() bool {
		c, err := net.DialTimeout("tcp", httpAddr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// discover opens an ADS stream with creds and waits for the answer to a request for
// clusters.
func discover(addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "deploy-test"}, TypeUrl: resourcev3.ClusterType}); err != nil {
		return err
	}
	_, err = stream.Recv()
	return err
}

// TestNetworkPoliciesFitThePods checks deploy/networkpolicy.yaml against the pods it is
// about: the controller's policy selects the controller's pods and not Envoy's, its xDS
// rule admits Envoy's pods and nothing else, every port it names is a port of the
// controller container, and every port of the controller is covered (a port left out
// would be closed by the policy). Envoy's policy opens exactly its three ports.
func TestNetworkPoliciesFitThePods(t *testing.T) {
	manifests := loadManifests(t)
	policies := map[string]networkingv1.NetworkPolicy{}
	for _, m := range manifests {
		if m.Obj.GetKind() != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		data, _ := m.Obj.MarshalJSON()
		if err := json.Unmarshal(data, &np); err != nil {
			t.Fatal(err)
		}
		policies[np.Name] = np
	}
	controllerSpec, controllerLabels := podSpec(t, manifests, "Deployment", "portico")
	envoySpec, envoyLabels := podSpec(t, manifests, "DaemonSet", "envoy")
	selects := func(sel metav1.LabelSelector, podLabels map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(labels.Set(podLabels))
	}
	ports := func(spec corev1.PodSpec) []string {
		var out []string
		for _, c := range spec.Containers {
			for _, p := range c.Ports {
				out = append(out, p.Name)
			}
		}
		return out
	}

	controller, ok := policies["portico"]
	if !ok {
		t.Fatal("deploy/ has no NetworkPolicy portico")
	}
	if !selects(controller.Spec.PodSelector, controllerLabels) || selects(controller.Spec.PodSelector, envoyLabels) {
		t.Fatal("NetworkPolicy portico must select the controller's pods and not Envoy's")
	}
	if !slices.Equal(controller.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy portico policy types %v, want Ingress", controller.Spec.PolicyTypes)
	}
	covered := map[string]bool{}
	for _, rule := range controller.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.Type != intstr.String {
				t.Fatalf("NetworkPolicy portico: port %v: name the container's ports", p.Port)
			}
			name := p.Port.StrVal
			if !slices.Contains(ports(controllerSpec), name) {
				t.Errorf("NetworkPolicy portico opens port %q, which the controller does not have", name)
			}
			covered[name] = true
			if name != "xds" {
				continue
			}
			// The two peers: Envoy's pods of this namespace, and the pods of the Gateways'
			// data planes (as the provisioner labels them) in their namespace.
			dataPlane := provision.Deployment(&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "gw"},
				Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}},
				provision.Options{Namespace: app.DefaultGatewayNamespace}).Spec.Template.Labels
			gatewayNS := map[string]string{"kubernetes.io/metadata.name": app.DefaultGatewayNamespace}
			if len(rule.From) != 2 || rule.From[0].PodSelector == nil || rule.From[0].NamespaceSelector != nil || rule.From[0].IPBlock != nil ||
				!selects(*rule.From[0].PodSelector, envoyLabels) || selects(*rule.From[0].PodSelector, controllerLabels) {
				t.Errorf("NetworkPolicy portico: the xds port must admit Envoy's pods of its namespace, then the Gateways' data planes, only; got %+v", rule.From)
			} else if gw := rule.From[1]; gw.PodSelector == nil || gw.NamespaceSelector == nil || gw.IPBlock != nil ||
				!selects(*gw.PodSelector, dataPlane) || selects(*gw.PodSelector, controllerLabels) ||
				!selects(*gw.NamespaceSelector, gatewayNS) || selects(*gw.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": "default"}) {
				t.Errorf("NetworkPolicy portico: the xds port must admit the Gateways' data planes in %s only, got %+v", app.DefaultGatewayNamespace, gw)
			}
			if len(rule.Ports) != 1 {
				t.Errorf("NetworkPolicy portico: the rule admitting Envoy opens %d ports, want xds only", len(rule.Ports))
			}
		}
	}
	for _, name := range ports(controllerSpec) {
		if !covered[name] {
			t.Errorf("NetworkPolicy portico closes the controller's port %q", name)
		}
	}

	envoy, ok := policies["envoy"]
	if !ok {
		t.Fatal("deploy/ has no NetworkPolicy envoy")
	}
	if !selects(envoy.Spec.PodSelector, envoyLabels) || selects(envoy.Spec.PodSelector, controllerLabels) {
		t.Fatal("NetworkPolicy envoy must select Envoy's pods and not the controller's")
	}
	var open []string
	for _, rule := range envoy.Spec.Ingress {
		for _, p := range rule.Ports {
			open = append(open, p.Port.StrVal)
		}
	}
	slices.Sort(open)
	want := ports(envoySpec)
	slices.Sort(want)
	if !slices.Equal(open, want) {
		t.Errorf("NetworkPolicy envoy opens %v, want Envoy's ports %v", open, want)
	}
}

// TestEnvoyTrustsTheControllersCertificate checks that deploy/envoy.yaml and
// deploy/portico.yaml agree: Envoy's bootstrap names the client certificate files of the
// Secret the controller writes, mounted where the bootstrap looks, and dials the
// controller by a name its managed certificate carries.
func TestEnvoyTrustsTheControllersCertificate(t *testing.T) {
	manifests := loadManifests(t)
	boot := container(t, manifests, "DaemonSet", "envoy", "bootstrap")
	envoy := container(t, manifests, "DaemonSet", "envoy", "envoy")
	spec, _ := podSpec(t, manifests, "DaemonSet", "envoy")
	flags := map[string]string{}
	for i := 0; i+1 < len(boot.Args); i++ {
		if strings.HasPrefix(boot.Args[i], "--") {
			flags[boot.Args[i]] = strings.ReplaceAll(boot.Args[i+1], "$(POD_NAMESPACE)", systemNamespace)
		}
	}
	host, _, err := net.SplitHostPort(flags["--xds-address"])
	if err != nil {
		t.Fatalf("bootstrap --xds-address: %v", err)
	}
	if host != xdsServerName {
		t.Errorf("Envoy dials %q; the controller's certificate is for %q by default", host, xdsServerName)
	}
	var secretDir string
	for _, v := range spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != managedtls.DefaultClientSecret {
			continue
		}
		if v.Secret.Optional != nil && *v.Secret.Optional {
			t.Error("the client certificate volume is optional: Envoy would start without it and never connect")
		}
		for _, m := range envoy.VolumeMounts {
			if m.Name == v.Name {
				secretDir = m.MountPath
			}
		}
	}
	if secretDir == "" {
		t.Fatalf("the envoy container does not mount the Secret %s", managedtls.DefaultClientSecret)
	}
	for flag, key := range map[string]string{"--xds-tls-cert-file": "tls.crt", "--xds-tls-key-file": "tls.key", "--xds-tls-ca-file": "ca.crt"} {
		if got, want := flags[flag], filepath.Join(secretDir, key); got != want {
			t.Errorf("bootstrap %s %q, want %q (the Secret's %s)", flag, got, want, key)
		}
	}
	args := shippedServeArgs(t, manifests)
	if !slices.Contains(args, "--managed-certificates") {
		t.Error("deploy/portico.yaml does not run serve with --managed-certificates")
	}
	for _, a := range args {
		if a == "--xds-insecure" || strings.HasPrefix(a, "--pprof-addr") {
			t.Errorf("deploy/portico.yaml runs serve with %s", a)
		}
	}
}
