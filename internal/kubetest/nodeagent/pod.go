package nodeagent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pod is a Pod this node runs: its network, its containers and the files they use.
type pod struct {
	agent *Agent
	key   string
	spec  *corev1.Pod // as first seen: what the containers were started from
	net   *podNet
	dir   string
	log   *slog.Logger
	start metav1.Time

	containers []*container
	cancel     context.CancelFunc // stops the containers' loops
	loops      sync.WaitGroup

	mu          sync.Mutex
	terminating bool
	gone        chan struct{} // closed when stopped and cleaned up
}

// startPod creates the Pod's network and starts its containers.
func (a *Agent) startPod(ctx context.Context, key string, spec *corev1.Pod) (*pod, error) {
	dir := filepath.Join(a.dir, "pods", string(spec.UID))
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	pn, err := a.net.add(ctx)
	if err != nil {
		return nil, err
	}
	p := &pod{
		agent: a, key: key, spec: spec.DeepCopy(), net: pn, dir: dir,
		log:   a.log.With("pod", key, "ip", pn.PodIP),
		start: metav1.Now(),
		gone:  make(chan struct{}),
	}
	if len(spec.Spec.InitContainers) > 0 {
		p.log.Warn("init containers are not run by the test node agent")
	}
	runCtx, cancel := context.WithCancel(a.ctx)
	p.cancel = cancel
	for _, cs := range spec.Spec.Containers {
		c := newContainer(cs, filepath.Join(dir, "logs", cs.Name+".log"))
		p.containers = append(p.containers, c)
	}
	for _, c := range p.containers {
		p.loops.Go(func() { p.runContainer(runCtx, c) })
	}
	p.log.Info("pod started")
	return p, nil
}

// changed asks the agent to write the Pod's status.
func (p *pod) changed() { p.agent.queue.Add(p.key) }

// stop terminates the containers (SIGTERM, SIGKILL after grace), removes the network
// and closes gone. Later calls wait for the first to finish.
func (p *pod) stop(grace time.Duration) {
	p.mu.Lock()
	if p.terminating {
		p.mu.Unlock()
		<-p.gone
		return
	}
	p.terminating = true
	p.mu.Unlock()
	p.cancel()
	deadline := time.After(grace)
	var wg sync.WaitGroup
	for _, c := range p.containers {
		wg.Go(func() { c.stop(deadline) })
	}
	wg.Wait()
	p.loops.Wait()
	p.agent.net.remove(context.Background(), p.net)
	p.log.Info("pod stopped")
	close(p.gone)
}

func (p *pod) isTerminating() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.terminating
}

// done reports whether every container has terminated for good (restartPolicy Never or
// OnFailure), and whether all succeeded.
func (p *pod) done() (finished, succeeded bool) {
	succeeded = true
	for _, c := range p.containers {
		code, ok := c.terminated()
		if !ok || restarts(p.spec.Spec.RestartPolicy, code) {
			return false, false
		}
		succeeded = succeeded && code == 0
	}
	return true, succeeded
}

// status is the Pod's status as this node sees it; conditions keep their transition
// times from old when unchanged.
func (p *pod) status(old *corev1.PodStatus) corev1.PodStatus {
	st := corev1.PodStatus{
		HostIP:    NodeIP,
		HostIPs:   []corev1.HostIP{{IP: NodeIP}},
		PodIP:     p.net.PodIP,
		PodIPs:    []corev1.PodIP{{IP: p.net.PodIP}},
		StartTime: &p.start,
		QOSClass:  old.QOSClass,
	}
	allReady, anyRunning, allStarted := true, false, true
	for _, c := range p.containers {
		cs := c.status()
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		allReady = allReady && cs.Ready
		anyRunning = anyRunning || cs.State.Running != nil
		allStarted = allStarted && (cs.State.Running != nil || cs.State.Terminated != nil || cs.RestartCount > 0)
	}
	finished, succeeded := p.done()
	switch {
	case finished && succeeded:
		st.Phase = corev1.PodSucceeded
	case finished:
		st.Phase = corev1.PodFailed
	case anyRunning || allStarted:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	if finished {
		allReady = false
	}
	st.Conditions = []corev1.PodCondition{
		condition(old, corev1.PodReadyToStartContainers, true, ""),
		condition(old, corev1.PodInitialized, true, ""),
		condition(old, corev1.ContainersReady, allReady, "ContainersNotReady"),
		condition(old, corev1.PodReady, allReady, "ContainersNotReady"),
		condition(old, corev1.PodScheduled, true, ""),
	}
	return st
}

func condition(old *corev1.PodStatus, t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
	c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
	if !ok {
		c.Status, c.Reason = corev1.ConditionFalse, reason
	}
	for _, o := range old.Conditions {
		if o.Type == t && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.Now()
	}
	return c
}

// gracePeriod is how long a container gets between SIGTERM and SIGKILL.
func gracePeriod(p *corev1.Pod) time.Duration {
	if p.DeletionGracePeriodSeconds != nil {
		return time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	}
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// kill sends SIGKILL to every container at once (whatever grace a stop under way
// allowed): the node is going away.
func (p *pod) kill() {
	for _, c := range p.containers {
		c.kill()
	}
}
