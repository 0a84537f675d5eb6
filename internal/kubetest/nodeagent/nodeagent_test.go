package nodeagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/kubetest/nodeagent"
	"github.com/portico-dev/portico/internal/testutil"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	code := kubetest.Main(m, &env)
	if podinfo.path != "" {
		_ = os.RemoveAll(filepath.Dir(podinfo.path)) // podinfoImage's build, 11 MB
	}
	os.Exit(code)
}

// wait is the deadline of every wait on the API server and the Pods: generous, since
// the machine may be loaded (a Pod start is a few process starts).
const wait = 2 * time.Minute

// The Gateway API conformance suite's backends, as its manifests spell them: a
// Deployment of echo-basic with 2 replicas and a Service in front.
func TestEchoBasicDeployment(t *testing.T) {
	agent, cs, ns := start(t, kubetest.WorkloadOptions{}, "echo")
	ctx := t.Context()

	must(cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "infra-backend-v1"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "infra-backend-v1"},
			Ports:    []corev1.ServicePort{{Name: "first-port", Port: 8080, TargetPort: intstr.FromInt32(3000)}},
		},
	}, metav1.CreateOptions{}))(t)
	deploy := must(cs.AppsV1().Deployments(ns).Create(ctx, echoDeployment("infra-backend-v1", 2), metav1.CreateOptions{}))(t)

	pods := readyPods(t, cs, ns, "app=infra-backend-v1", 2)
	if pods[0].Status.PodIP == pods[1].Status.PodIP {
		t.Fatalf("both pods have IP %s", pods[0].Status.PodIP)
	}
	for _, p := range pods {
		if p.Spec.NodeName != agent.NodeName() || p.Status.HostIP != nodeagent.NodeIP {
			t.Errorf("pod %s: node %q hostIP %q, want %q %q", p.Name, p.Spec.NodeName, p.Status.HostIP, agent.NodeName(), nodeagent.NodeIP)
		}
		got := echo(t, p.Status.PodIP)
		if got.Pod != p.Name || got.Namespace != ns {
			t.Errorf("GET http://%s:3000/ answered pod %q namespace %q, want %q %q", p.Status.PodIP, got.Pod, got.Namespace, p.Name, ns)
		}
	}
	endpointsListed(t, cs, ns, "infra-backend-v1", ips(pods))

	// The log, through the API server and the node agent's kubelet endpoint.
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pods[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "listening on port 3000") {
		t.Errorf("logs of %s: %q, %v; want echo-basic's start line", pods[0].Name, logs, err)
	}

	// A deleted Pod is stopped and replaced.
	victim := pods[0]
	if err := cs.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, "the deleted pod to be gone", func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	pods = readyPods(t, cs, ns, "app=infra-backend-v1", 2)
	if slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == victim.Name }) {
		t.Fatalf("pod %s still listed after deletion", victim.Name)
	}
	for _, p := range pods {
		if got := echo(t, p.Status.PodIP); got.Pod != p.Name {
			t.Errorf("GET http://%s:3000/ answered pod %q, want %q", p.Status.PodIP, got.Pod, p.Name)
		}
	}
	endpointsListed(t, cs, ns, "infra-backend-v1", ips(pods))
	binary := filepath.Join(env.BinDir, "echo-basic")
	if n := processes(t, binary); n != 2 {
		t.Errorf("%d echo-basic processes after the replacement, want 2", n)
	}

	// Scaled to zero: no Pods, no processes, an empty EndpointSlice.
	deploy = must(cs.AppsV1().Deployments(ns).Get(ctx, deploy.Name, metav1.GetOptions{}))(t)
	deploy.Spec.Replicas = new(int32)
	must(cs.AppsV1().Deployments(ns).Update(ctx, deploy, metav1.UpdateOptions{}))(t)
	testutil.Eventually(t, wait, "no pods and no echo-basic processes", func() bool {
		list := must(cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}))(t)
		return len(list.Items) == 0 && processes(t, binary) == 0
	})
	endpointsListed(t, cs, ns, "infra-backend-v1", nil)
}

// A container sees its fieldRef variables, a Secret key as a variable, and Secret and
// ConfigMap volumes at their mount paths; the mounts stay private to it.
func TestEnvAndVolumes(t *testing.T) {
	_, cs, ns := start(t, kubetest.WorkloadOptions{Images: []nodeagent.Image{podinfoImage(t)}}, "env")
	ctx := t.Context()
	must(cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data:       map[string][]byte{"user": []byte("alice"), "password": []byte("s3cret")},
	}, metav1.CreateOptions{}))(t)
	must(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data:       map[string]string{"mode": "blue"},
	}, metav1.CreateOptions{}))(t)
	podKubeconfig, err := env.PodKubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	must(cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kube"},
		Data:       map[string][]byte{"ca.crt": env.Config.CAData, "kubeconfig": podKubeconfig},
	}, metav1.CreateOptions{}))(t)
	const secretDir, configDir, kubeDir = "/etc/nodeagent-test/creds", "/var/nodeagent-test-settings", "/etc/nodeagent-test/kube"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "info", Labels: map[string]string{"tier": "gold"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "info",
				Image: podinfoRepo + ":v1",
				Args:  []string{"-files=" + secretDir + "," + configDir, "-addr=:$(PORT)"},
				Env: []corev1.EnvVar{
					{Name: "PORT", Value: "8081"},
					fieldEnv("POD_NAME", "metadata.name"),
					fieldEnv("POD_NAMESPACE", "metadata.namespace"),
					fieldEnv("POD_IP", "status.podIP"),
					fieldEnv("HOST_IP", "status.hostIP"),
					fieldEnv("NODE_NAME", "spec.nodeName"),
					fieldEnv("TIER", "metadata.labels['tier']"),
					{Name: "USER", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "user",
					}}},
					{Name: "GREETING", Value: "hello $(USER) from $(POD_NAME)"},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "creds", MountPath: secretDir, ReadOnly: true},
					{Name: "settings", MountPath: configDir},
					{Name: "kube", MountPath: kubeDir},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
				}}},
				{Name: "kube", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "kube"}}},
			},
		},
	}
	must(cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}))(t)
	p := readyPods(t, cs, ns, "tier=gold", 1)[0]

	var got struct {
		Env   map[string]string
		Files map[string]string
	}
	getJSON(t, "http://"+net.JoinHostPort(p.Status.PodIP, "8081")+"/", &got)
	want := map[string]string{
		"POD_NAME": "info", "POD_NAMESPACE": ns, "POD_IP": p.Status.PodIP, "HOST_IP": nodeagent.NodeIP,
		"NODE_NAME": p.Spec.NodeName, "TIER": "gold", "USER": "alice", "GREETING": "hello alice from info",
		"HOSTNAME": "info",
	}
	for k, v := range want {
		if got.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, got.Env[k], v)
		}
	}
	wantFiles := map[string]string{
		secretDir + "/user": "alice", secretDir + "/password": "s3cret", configDir + "/mode": "blue",
	}
	for k, v := range wantFiles {
		if got.Files[k] != v {
			t.Errorf("file %s = %q, want %q (all: %v)", k, got.Files[k], v, got.Files)
		}
	}
	// The API server, at the address of PodKubeconfig, answers the Pod (TLS verified
	// with the CA of the kubeconfig).
	kc, err := clientcmd.Load(podKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var fetched map[string]any
	server := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server
	getJSON(t, "http://"+net.JoinHostPort(p.Status.PodIP, "8081")+"/get?url="+url.QueryEscape(server+"/readyz")+"&ca="+kubeDir+"/ca.crt", &fetched)
	if fetched["status"] != float64(http.StatusOK) {
		t.Errorf("the pod fetching %s/readyz: %v, want status 200", server, fetched)
	}

	// The bind mounts are the container's own: the host sees no Secret there.
	if _, err := os.Stat(secretDir + "/user"); !os.IsNotExist(err) {
		t.Errorf("host sees %s/user (%v): the mount leaked out of the container", secretDir, err)
	}
}

// An image without a binary is an error on the Pod, naming the images the node knows.
func TestUnknownImage(t *testing.T) {
	_, cs, ns := start(t, kubetest.WorkloadOptions{}, "unknown")
	ctx := t.Context()
	must(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{}))(t)
	var st corev1.ContainerStatus
	testutil.Eventually(t, wait, "the pod's container to wait with ErrImagePull", func() bool {
		p := must(cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}))(t)
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		st = p.Status.ContainerStatuses[0]
		return st.State.Waiting.Reason == "ErrImagePull" && p.Status.Phase == corev1.PodPending && !podReady(p)
	})
	msg := st.State.Waiting.Message
	if !strings.Contains(msg, `"nginx:1.27"`) || !strings.Contains(msg, "registry.k8s.io/gateway-api/conformance/echo-basic") {
		t.Errorf("waiting message %q, want it to name the image and the known ones", msg)
	}
}

// Init containers run first, one after the other, sharing emptyDir volumes with the
// containers; an init container that fails under restartPolicy Never fails the Pod.
func TestInitContainers(t *testing.T) {
	_, cs, ns := start(t, kubetest.WorkloadOptions{Images: []nodeagent.Image{podinfoImage(t)}}, "init")
	ctx := t.Context()
	const work = "/nodeagent-test-work"
	mounts := []corev1.VolumeMount{{Name: "work", MountPath: work}}
	pod := func(name string, policy corev1.RestartPolicy, initArgs ...[]string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod": name}},
			Spec: corev1.PodSpec{
				RestartPolicy: policy,
				Containers: []corev1.Container{{
					Name: "main", Image: podinfoRepo, Args: []string{"-files=" + work}, VolumeMounts: mounts,
				}},
				Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			},
		}
		for i, args := range initArgs {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
				Name: fmt.Sprintf("init-%d", i), Image: podinfoRepo, Args: args, VolumeMounts: mounts,
			})
		}
		return p
	}
	must(cs.CoreV1().Pods(ns).Create(ctx, pod("ok", corev1.RestartPolicyAlways,
		[]string{"-write=" + work + "/first=1"}, []string{"-write=" + work + "/second=2"}), metav1.CreateOptions{}))(t)
	must(cs.CoreV1().Pods(ns).Create(ctx, pod("failing", corev1.RestartPolicyNever,
		[]string{"-exit=1"}), metav1.CreateOptions{}))(t)

	ok := readyPods(t, cs, ns, "pod=ok", 1)[0]
	var got struct{ Files map[string]string }
	getJSON(t, "http://"+net.JoinHostPort(ok.Status.PodIP, "8080")+"/", &got)
	if got.Files[work+"/first"] != "1" || got.Files[work+"/second"] != "2" {
		t.Errorf("main container sees %v, want both init containers' files", got.Files)
	}
	for _, st := range ok.Status.InitContainerStatuses {
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			t.Errorf("init container %s: %+v, want terminated with 0", st.Name, st.State)
		}
	}

	testutil.Eventually(t, wait, "the pod whose init container fails to be Failed", func() bool {
		p := must(cs.CoreV1().Pods(ns).Get(ctx, "failing", metav1.GetOptions{}))(t)
		return p.Status.Phase == corev1.PodFailed
	})
	failing := must(cs.CoreV1().Pods(ns).Get(ctx, "failing", metav1.GetOptions{}))(t)
	if cs := failing.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].RestartCount != 0 {
		t.Errorf("main container of the failed pod: %+v, want waiting, never started", cs)
	}
}

// Portico's own image runs the binary the test built: here `portico echo`, with
// arguments expanded from fieldRef variables and Ready by a tcpSocket probe.
func TestPorticoImage(t *testing.T) {
	_, cs, ns := start(t, kubetest.WorkloadOptions{PorticoBinary: testutil.PorticoBinary(t)}, "portico")
	ctx := t.Context()
	must(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "backend", Labels: map[string]string{"app": "backend"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:    "echo",
			Image:   nodeagent.PorticoRepository + ":v0.7.0",
			Command: []string{"/portico"},
			Args:    []string{"echo", "--listen=:9000", "--service=$(POD_NAME)", "--namespace=$(POD_NAMESPACE)"},
			Env:     []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace")},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9000)}},
				PeriodSeconds: 1,
			},
		}}},
	}, metav1.CreateOptions{}))(t)
	p := readyPods(t, cs, ns, "app=backend", 1)[0]
	var got struct{ Service, Namespace string }
	getJSON(t, "http://"+net.JoinHostPort(p.Status.PodIP, "9000")+"/", &got)
	if got.Service != "backend" || got.Namespace != ns {
		t.Errorf("portico echo answered service %q namespace %q, want backend %q", got.Service, got.Namespace, ns)
	}
}

// Readiness follows the readiness probe; a container that exits, or fails its liveness
// probe, is restarted (restart count, last state) and Ready again; deletion sends
// SIGTERM first.
func TestProbesRestartsAndDeletion(t *testing.T) {
	agent, cs, ns := start(t, kubetest.WorkloadOptions{Images: []nodeagent.Image{podinfoImage(t)}}, "probes")
	ctx := t.Context()
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 1,
		}
	}
	for name, path := range map[string]string{"good": "/status/200", "bad": "/status/500"} {
		must(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"probe": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "info", Image: podinfoRepo,
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: probe(path),
			}}},
		}, metav1.CreateOptions{}))(t)
	}
	must(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unhealthy"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "info", Image: podinfoRepo,
			Ports:         []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			LivenessProbe: probe("/status/503"),
		}}},
	}, metav1.CreateOptions{}))(t)
	good := readyPods(t, cs, ns, "probe=good", 1)[0]

	// The bad one runs, is probed (its log shows the probes) and is not Ready.
	testutil.Eventually(t, wait, "three failed probes of the bad pod", func() bool {
		logs, _ := agent.Logs(ns, "bad", "info")
		return strings.Count(string(logs), "GET /status/500") >= 3
	})
	if bad := must(cs.CoreV1().Pods(ns).Get(ctx, "bad", metav1.GetOptions{}))(t); podReady(bad) || bad.Status.Phase != corev1.PodRunning || bad.Status.PodIP == "" {
		t.Errorf("bad pod: phase %s ready %v, want Running and not Ready", bad.Status.Phase, podReady(bad))
	}

	// Pods reach each other and the host (through their default route, the host
	// forwarding).
	host, err := net.Listen("tcp", net.JoinHostPort(nodeagent.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })}
	go func() { _ = hostSrv.Serve(host) }()
	defer hostSrv.Close()
	bad := must(cs.CoreV1().Pods(ns).Get(ctx, "bad", metav1.GetOptions{}))(t)
	for target, want := range map[string]float64{
		"http://" + net.JoinHostPort(good.Status.PodIP, "8080") + "/status/204": http.StatusNoContent,
		"http://" + host.Addr().String() + "/":                                  http.StatusAccepted,
	} {
		var got map[string]any
		getJSON(t, "http://"+net.JoinHostPort(bad.Status.PodIP, "8080")+"/get?url="+url.QueryEscape(target), &got)
		if got["status"] != want {
			t.Errorf("pod bad fetching %s: %v, want status %v", target, got, want)
		}
	}

	// Exit 3: restarted, with the exit in its last state.
	resp, err := http.Get("http://" + net.JoinHostPort(good.Status.PodIP, "8080") + "/exit/3")
	if err == nil {
		resp.Body.Close()
	}
	testutil.Eventually(t, wait, "the good pod restarted and Ready again", func() bool {
		p := must(cs.CoreV1().Pods(ns).Get(ctx, "good", metav1.GetOptions{}))(t)
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Running != nil && podReady(p) &&
			cs[0].LastTerminationState.Terminated != nil && cs[0].LastTerminationState.Terminated.ExitCode == 3
	})

	// A failing liveness probe restarts the container.
	testutil.Eventually(t, wait, "the unhealthy pod restarted by its liveness probe", func() bool {
		p := must(cs.CoreV1().Pods(ns).Get(ctx, "unhealthy", metav1.GetOptions{}))(t)
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})

	// Deletion: SIGTERM (podinfo logs it), then the Pod is gone.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "good", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, "the good pod gone after SIGTERM", func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "good", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	logs, err := agent.Logs(ns, "good", "info")
	if err != nil || !strings.Contains(string(logs), "SIGTERM") {
		t.Errorf("log of the deleted pod: %q, %v; want the SIGTERM it got", logs, err)
	}
}

const podinfoRepo = "example.com/nodeagent/podinfo"

var podinfo struct {
	once sync.Once
	path string
	err  error
}

// podinfoImage builds testdata/podinfo once per test binary and maps podinfoRepo to it.
func podinfoImage(t *testing.T) nodeagent.Image {
	t.Helper()
	podinfo.once.Do(func() {
		dir, err := os.MkdirTemp("", "podinfo-")
		if err != nil {
			podinfo.err = err
			return
		}
		podinfo.path = filepath.Join(dir, "podinfo")
		if out, err := exec.Command("go", "build", "-o", podinfo.path, "./testdata/podinfo").CombinedOutput(); err != nil {
			podinfo.err = fmt.Errorf("go build ./testdata/podinfo: %v\n%s", err, out)
		}
	})
	if podinfo.err != nil {
		t.Fatal(podinfo.err)
	}
	return nodeagent.Image{Repository: podinfoRepo, Binary: podinfo.path}
}

func echoDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  name,
					Image: "registry.k8s.io/gateway-api/conformance/echo-basic:v0.1.0",
					Env:   []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("NAMESPACE", "metadata.namespace")},
				}}},
			},
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// start starts workloads for the test with opts, and a namespace named after prefix.
func start(t *testing.T, opts kubetest.WorkloadOptions, prefix string) (*nodeagent.Agent, kubernetes.Interface, string) {
	t.Helper()
	env.Require(t)
	agent := env.StartWorkloads(t, opts)
	cs := kubetest.Clientset(t, env.Config)
	return agent, cs, namespace(t, cs, prefix)
}

// namespace creates a namespace named after prefix and deletes it when the test ends.
func namespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns := must(cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{}))(t)
	cleanupNamespace(t, cs, ns.Name)
	return ns.Name
}

// cleanupNamespace deletes ns when the test ends and waits until it is gone. Registered
// after StartWorkloads, it runs while the agent still does: the namespace controller
// deletes the Pods, the agent stops them and the namespace goes, instead of Pods left
// over for the next test's agent.
func cleanupNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Cleanup(func() {
		ctx := context.Background()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
			return
		}
		testutil.Eventually(t, wait, "namespace "+ns+" deleted", func() bool {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})
}

// must(f()) fails the test when f's error is not nil, and returns f's value otherwise.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyPods waits until exactly n Pods match selector, all Ready with an IP and none
// being deleted, and returns them.
func readyPods(t *testing.T, cs kubernetes.Interface, ns, selector string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testutil.Eventually(t, wait, fmt.Sprintf("%d ready pods %s in %s", n, selector, ns), func() bool {
		list := must(cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector}))(t)
		pods = list.Items
		if len(pods) != n {
			return false
		}
		for i := range pods {
			if !podReady(&pods[i]) || pods[i].Status.PodIP == "" || pods[i].DeletionTimestamp != nil {
				return false
			}
		}
		return true
	})
	return pods
}

func ips(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Status.PodIP)
	}
	slices.Sort(out)
	return out
}

// endpointsListed waits until the Service's EndpointSlices list exactly want as ready
// addresses.
func endpointsListed(t *testing.T, cs kubernetes.Interface, ns, service string, want []string) {
	t.Helper()
	var got []string
	testutil.Eventually(t, wait, fmt.Sprintf("EndpointSlices of %s listing %v", service, want), func() bool {
		list := must(cs.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + service,
		}))(t)
		got = nil
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, e.Addresses...)
				}
			}
		}
		slices.Sort(got)
		return len(list.Items) > 0 && slices.Equal(got, want)
	})
}

type echoResponse struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
}

func echo(t *testing.T, ip string) echoResponse {
	t.Helper()
	var r echoResponse
	getJSON(t, "http://"+net.JoinHostPort(ip, "3000")+"/", &r)
	return r
}

// getJSON decodes the answer to GET url into v. A Ready Pod without a readiness probe
// (as the conformance suite's) may not listen yet: connection errors are retried.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	var resp *http.Response
	var err error
	testutil.Eventually(t, wait, "an answer from "+url, func() bool {
		resp, err = http.Get(url)
		if err != nil {
			t.Logf("GET %s: %v", url, err)
		}
		return err == nil
	})
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// processes counts the running processes of binary.
func processes(t *testing.T, binary string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == binary {
			n++
		}
	}
	return n
}

// TestLoadBalancerService: a Service of type LoadBalancer gets an address of
// LoadBalancerSubnet in its status, and connections to it reach the Service's ready
// endpoints, each of them in turn, as through a cloud's load balancer; the address goes
// with the Service.
func TestLoadBalancerService(t *testing.T) {
	env.Require(t)
	env.StartWorkloads(t, kubetest.WorkloadOptions{})
	ctx := t.Context()
	cs := kubetest.Clientset(t, env.Config)
	ns := namespace(t, cs, "lb")
	must(cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(3000)}},
		},
	}, metav1.CreateOptions{}))(t)
	must(cs.AppsV1().Deployments(ns).Create(ctx, echoDeployment("web", 2), metav1.CreateOptions{}))(t)
	pods := readyPods(t, cs, ns, "app=web", 2)

	var ip string
	testutil.Eventually(t, wait, "the Service's load-balancer address", func() bool {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(svc.Status.LoadBalancer.Ingress) != 1 {
			return false
		}
		ip = svc.Status.LoadBalancer.Ingress[0].IP
		return true
	})
	if _, subnet, _ := net.ParseCIDR(nodeagent.LoadBalancerSubnet); !subnet.Contains(net.ParseIP(ip)) {
		t.Fatalf("load-balancer address %s is not in %s", ip, nodeagent.LoadBalancerSubnet)
	}
	seen := map[string]bool{}
	oneShot := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	testutil.Eventually(t, wait, "both pods answering through the load balancer", func() bool {
		// A connection each: the load balancer picks an endpoint per connection.
		resp, err := oneShot.Get("http://" + ip + ":80/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Pod string `json:"pod"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) == nil {
			seen[body.Pod] = true
		}
		return seen[pods[0].Name] && seen[pods[1].Name]
	})

	if err := cs.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Whether a connection to an address that is not this machine's fails depends on the
	// network around it (a proxy may answer anything): the address must leave the host.
	testutil.Eventually(t, wait, "the address to go with the Service", func() bool {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(addrs, func(a net.Addr) bool { return strings.HasPrefix(a.String(), ip+"/") })
	})
}
