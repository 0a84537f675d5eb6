// Package nodeagent is a small kubelet for tests: it registers a Node, binds pending
// Pods to it (there is no scheduler) and runs each container as a process in a network
// namespace with the Pod's own IP, so that Deployments applied to a test API server get
// real Pods, Ready conditions and, with kube-controller-manager, EndpointSlices.
//
// Images map to local binaries (Options.Images); a Pod of any other image gets a
// container waiting with reason ErrImagePull whose message lists the known images.
// Supported: command and args, env (value, fieldRef, resourceFieldRef, secretKeyRef,
// configMapKeyRef, envFrom), Secret, ConfigMap and emptyDir volumes bind-mounted at their
// mount paths in a private mount namespace per container, readiness and liveness from
// httpGet and tcpSocket probes, restarts by restartPolicy with a doubling backoff,
// graceful deletion (SIGTERM, SIGKILL after the grace period, then the final delete),
// and the output of each container kept as its log (Agent.Logs, and the kubelet's
// /containerLogs endpoint for `kubectl logs` through the API server). Not supported:
// init containers, exec probes, other volume types, resource limits, image pulls.
//
// It needs root and iproute2 (it creates network namespaces and veth pairs, adds NodeIP
// to the loopback interface, and turns on IPv4 forwarding while it runs).
package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Options configure an Agent.
type Options struct {
	// Client talks to the API server, with rights to Nodes, Leases, Pods (binding and
	// status included), Secrets and ConfigMaps (the tests' admin client).
	Client kubernetes.Interface
	// NodeName defaults to "kubetest-node".
	NodeName string
	// Images are the images the node can run.
	Images []Image
	// Dir holds the Pods' volumes and logs; a temporary directory removed by Stop when empty.
	Dir string
	// BackoffBase and BackoffMax bound the restart backoff (the kubelet's are 10s and 5m;
	// the defaults here, 1s and 30s, keep tests of restarts short).
	BackoffBase, BackoffMax time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Agent is a running node agent.
type Agent struct {
	opts     Options
	client   kubernetes.Interface
	images   imageSet
	log      *slog.Logger
	dir      string
	ownDir   bool
	mountBin string

	ctx    context.Context
	cancel context.CancelFunc
	net    *network
	queue  workqueue.TypedRateLimitingInterface[string]
	pods   corelisters.PodLister
	logs   *logServer
	done   sync.WaitGroup

	mu          sync.Mutex
	running     map[string]*pod   // by namespace/name
	logFiles    map[string]string // namespace/name/container → log of the latest Pod of that name
	mountPoints []string          // created on the host for bind mounts, removed by Stop
	stopped     bool
}

// Start registers the node and starts serving Pods. Stop undoes it.
func Start(ctx context.Context, opts Options) (*Agent, error) {
	if opts.Client == nil {
		return nil, errors.New("nodeagent: Options.Client is nil")
	}
	if opts.NodeName == "" {
		opts.NodeName = "kubetest-node"
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Second
	}
	if opts.BackoffMax < opts.BackoffBase {
		opts.BackoffMax = max(30*time.Second, opts.BackoffBase)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	mountBin, err := exec.LookPath("mount")
	if err != nil {
		return nil, fmt.Errorf("nodeagent: %w", err)
	}
	a := &Agent{
		opts: opts, client: opts.Client, images: imageSet(opts.Images),
		log:      opts.Logger.With("node", opts.NodeName),
		dir:      opts.Dir,
		mountBin: mountBin,
		running:  map[string]*pod{},
		logFiles: map[string]string{},
	}
	if a.dir == "" {
		if a.dir, err = os.MkdirTemp("", "nodeagent-"); err != nil {
			return nil, err
		}
		a.ownDir = true
	}
	a.ctx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if a.net, err = newNetwork(ctx); err != nil {
		return nil, fmt.Errorf("nodeagent: pod network: %w", err)
	}
	if a.logs, err = startLogServer(a); err != nil {
		a.net.close(ctx)
		return nil, fmt.Errorf("nodeagent: log server: %w", err)
	}
	if err := a.register(ctx); err != nil {
		a.logs.close()
		a.net.close(ctx)
		return nil, fmt.Errorf("nodeagent: registering node %s: %w", opts.NodeName, err)
	}
	a.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	factory := informers.NewSharedInformerFactory(a.client, 0)
	podInformer := factory.Core().V1().Pods()
	a.pods = podInformer.Lister()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueue,
		UpdateFunc: func(_, obj any) { a.enqueue(obj) },
		DeleteFunc: a.enqueue,
	}); err != nil {
		return nil, err
	}
	factory.Start(a.ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if ctx.Err() != nil {
		a.Stop()
		return nil, ctx.Err()
	}
	a.done.Go(func() { a.heartbeat() })
	for range 2 {
		a.done.Go(func() {
			for a.processNext() {
			}
		})
	}
	a.log.Info("node agent started", "nodeIP", NodeIP, "images", a.images.names())
	return a, nil
}

// NodeName is the name of the agent's Node.
func (a *Agent) NodeName() string { return a.opts.NodeName }

func (a *Agent) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		a.queue.Add(key)
	}
}

func (a *Agent) processNext() bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	if err := a.sync(a.ctx, key); err != nil {
		if a.ctx.Err() == nil {
			a.log.Debug("sync failed, retrying", "pod", key, "err", err)
		}
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// sync brings the Pod key and what runs for it together.
func (a *Agent) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	obj, err := a.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		a.forget(key, nil)
		return nil
	}
	if err != nil {
		return err
	}
	if obj.Spec.NodeName == "" {
		if obj.DeletionTimestamp != nil {
			return nil
		}
		return a.bind(ctx, obj)
	}
	if obj.Spec.NodeName != a.opts.NodeName {
		return nil
	}
	p := a.lookup(key)
	if p != nil && p.spec.UID != obj.UID {
		a.forget(key, p) // a Pod of the same name replaced the one we ran
		p = nil
	}
	if obj.DeletionTimestamp != nil {
		return a.terminate(ctx, key, obj, p)
	}
	if p == nil {
		if obj.Status.Phase == corev1.PodSucceeded || obj.Status.Phase == corev1.PodFailed {
			return nil // finished before this agent started: nothing to run again
		}
		if p, err = a.add(ctx, key, obj); err != nil || p == nil {
			return err
		}
	}
	return a.writeStatus(ctx, obj, p)
}

func (a *Agent) lookup(key string) *pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running[key]
}

func (a *Agent) add(ctx context.Context, key string, obj *corev1.Pod) (*pod, error) {
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if stopped {
		return nil, nil
	}
	p, err := a.startPod(ctx, key, obj)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.stopped { // Stop did not see it: stop it here
		a.mu.Unlock()
		p.stop(0)
		return nil, nil
	}
	a.running[key] = p
	for _, c := range p.containers {
		a.logFiles[key+"/"+c.spec.Name] = c.logPath
	}
	a.mu.Unlock()
	return p, nil
}

// forget stops what runs for key (p, or whatever runs) at once: its Pod is gone.
func (a *Agent) forget(key string, p *pod) {
	a.mu.Lock()
	if p == nil {
		p = a.running[key]
	}
	if p != nil && a.running[key] == p {
		delete(a.running, key)
	}
	a.mu.Unlock()
	if p != nil {
		a.done.Go(func() { p.stop(0) })
	}
}

// bind assigns a pending Pod to this node, as the scheduler would.
func (a *Agent) bind(ctx context.Context, obj *corev1.Pod) error {
	err := a.client.CoreV1().Pods(obj.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: obj.Name, UID: obj.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: a.opts.NodeName},
	}, metav1.CreateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // bound meanwhile, or gone: the informer brings the news
	}
	return err
}

// terminate stops the Pod's containers within its grace period, then deletes the Pod
// for good (grace 0), as a kubelet finishes a graceful deletion.
func (a *Agent) terminate(ctx context.Context, key string, obj *corev1.Pod, p *pod) error {
	if p != nil {
		if !p.isTerminating() {
			grace := gracePeriod(obj)
			a.done.Go(func() {
				p.stop(grace)
				a.queue.Add(key)
			})
			return nil
		}
		select {
		case <-p.gone:
		default:
			return nil // still stopping; stop's end enqueues key again
		}
		a.mu.Lock()
		if a.running[key] == p {
			delete(a.running, key)
		}
		a.mu.Unlock()
	}
	zero := int64(0)
	uid := obj.UID
	err := a.client.CoreV1().Pods(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// writeStatus writes the Pod's status when it differs from what the API server has.
func (a *Agent) writeStatus(ctx context.Context, obj *corev1.Pod, p *pod) error {
	st := p.status(&obj.Status)
	if sameJSON(st, withoutExtras(obj.Status)) {
		return nil
	}
	upd := obj.DeepCopy()
	upd.Status = st
	_, err := a.client.CoreV1().Pods(obj.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// sameJSON compares statuses as the API server stores them (times to the second).
func sameJSON(a, b corev1.PodStatus) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// withoutExtras drops what the API server adds to a status this agent writes, so that an
// unchanged status compares equal.
func withoutExtras(s corev1.PodStatus) corev1.PodStatus {
	s.ObservedGeneration = 0
	s.Conditions = slices.Clone(s.Conditions)
	for i := range s.Conditions {
		s.Conditions[i].ObservedGeneration = 0
	}
	return s
}

// Logs returns the output of a container of a Pod this agent runs or ran (the latest
// Pod of that name): all its runs, restarts included.
func (a *Agent) Logs(namespace, name, containerName string) ([]byte, error) {
	a.mu.Lock()
	path, ok := a.logFiles[namespace+"/"+name+"/"+containerName]
	if !ok && containerName == "" {
		path, ok = a.soleContainerLog(namespace + "/" + name + "/")
	}
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: no container %q of pod %s/%s ran on this node", os.ErrNotExist, containerName, namespace, name)
	}
	return os.ReadFile(path)
}

// soleContainerLog is the log of the only container of a Pod (prefix "ns/name/").
func (a *Agent) soleContainerLog(prefix string) (string, bool) {
	var found []string
	for k, v := range a.logFiles {
		if strings.HasPrefix(k, prefix) {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// mountPoint makes sure a bind mount's target exists on the host (a directory, or a
// file for a file source), remembering what it created so that Stop removes it.
func (a *Agent) mountPoint(m mount) error {
	if _, err := os.Lstat(m.target); err == nil {
		return nil
	}
	fi, err := os.Stat(m.source)
	if err != nil {
		return &configError{msg: err.Error()}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var created []string
	for d := filepath.Dir(m.target); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == "/" {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(filepath.Dir(m.target), 0o755); err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.Mkdir(m.target, 0o755)
	} else {
		err = os.WriteFile(m.target, nil, 0o644)
	}
	if err != nil && !os.IsExist(err) {
		return err
	}
	a.mountPoints = append(a.mountPoints, m.target)
	a.mountPoints = append(a.mountPoints, created...) // deepest first
	return nil
}

// Stop kills every container at once (it is the node going away, not the Pods being
// deleted), removes the pod networks, the mount points it created and its directory,
// and leaves the Node and Pods in the API server as they are.
func (a *Agent) Stop() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	a.stopped = true
	pods := make([]*pod, 0, len(a.running))
	for _, p := range a.running {
		pods = append(pods, p)
	}
	a.mu.Unlock()
	a.cancel()
	if a.queue != nil {
		a.queue.ShutDown()
	}
	var wg sync.WaitGroup
	for _, p := range pods {
		p.kill()
		wg.Go(func() { p.stop(0) })
	}
	wg.Wait()
	a.done.Wait()
	a.logs.close()
	a.net.close(context.Background())
	a.mu.Lock()
	for _, m := range a.mountPoints {
		_ = os.Remove(m)
	}
	a.mu.Unlock()
	if a.ownDir && os.Getenv("PORTICO_KUBETEST_KEEP") == "" {
		_ = os.RemoveAll(a.dir)
	}
	a.log.Info("node agent stopped")
}
