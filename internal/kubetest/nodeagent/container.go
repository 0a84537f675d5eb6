package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mountScript runs inside the private mount namespace that `ip netns exec` creates
// (mounts there do not reach the host: it makes / a slave): it bind-mounts each
// source/target pair given before "--", then becomes the container's process.
const mountScript = `m=$1; shift
while [ "$1" != -- ]; do "$m" --bind "$1" "$2" || exit 127; shift 2; done
shift; exec "$@"`

// container is one container of a Pod: its process, restarts and state as the Pod's
// status reports them.
type container struct {
	spec    corev1.Container
	logPath string

	mu        sync.Mutex
	state     corev1.ContainerState
	lastState corev1.ContainerState
	restarts  int32
	ready     bool
	started   bool
	id        string
	proc      *os.Process
	exited    chan struct{} // closed when the current process has exited
}

func newContainer(spec corev1.Container, logPath string) *container {
	return &container{
		spec:    spec,
		logPath: logPath,
		state:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
	}
}

// status is the container's entry in Pod.status.containerStatuses.
func (c *container) status() corev1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	started := c.started
	return corev1.ContainerStatus{
		Name:                 c.spec.Name,
		Image:                c.spec.Image,
		ImageID:              c.spec.Image,
		ContainerID:          c.id,
		State:                *c.state.DeepCopy(),
		LastTerminationState: *c.lastState.DeepCopy(),
		Ready:                c.ready,
		Started:              &started,
		RestartCount:         c.restarts,
	}
}

func (c *container) setWaiting(reason, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	c.ready = false
}

func (c *container) setReady(ready bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Running == nil {
		ready = false
	}
	changed := c.ready != ready
	c.ready = ready
	return changed
}

func (c *container) terminated() (exitCode int32, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Terminated == nil {
		return 0, false
	}
	return c.state.Terminated.ExitCode, true
}

// launch is what the container needs to start a process.
type launch struct {
	argv   []string
	env    []string
	mounts []mount
}

// runContainer starts the container's process, restarting it by policy with a doubling
// backoff, until ctx ends (the Pod is being deleted: stop then kills the
// process) or the container is done for good.
func (p *pod) runContainer(ctx context.Context, c *container, policy corev1.RestartPolicy) {
	backoff := &backoff{base: p.agent.opts.BackoffBase, max: p.agent.opts.BackoffMax}
	for {
		l, err := p.prepare(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			reason := "CreateContainerConfigError"
			var ie *imageError
			if errors.As(err, &ie) {
				reason = "ErrImagePull"
			}
			p.log.Info("container cannot start", "container", c.spec.Name, "reason", reason, "err", err)
			c.setWaiting(reason, err.Error())
			p.changed()
			if !sleep(ctx, backoff.next()) {
				return
			}
			continue
		}
		began := time.Now()
		exit, err := p.startProcess(ctx, c, l)
		if err != nil {
			c.setWaiting("RunContainerError", err.Error())
			p.changed()
			if !sleep(ctx, backoff.next()) {
				return
			}
			continue
		}
		probeCtx, stopProbes := context.WithCancel(ctx)
		go p.probe(probeCtx, c)
		<-exit
		stopProbes()
		p.changed()
		if ctx.Err() != nil {
			return
		}
		code, _ := c.terminated()
		if !restarts(policy, code) {
			return
		}
		if time.Since(began) > 10*backoff.max {
			backoff.reset()
		}
		d := backoff.next()
		c.mu.Lock()
		c.lastState = c.state
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %v restarting failed container %s", d, c.spec.Name),
		}}
		c.restarts++
		c.mu.Unlock()
		p.changed()
		if !sleep(ctx, d) {
			return
		}
	}
}

func restarts(policy corev1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// imageError is an image the agent has no binary for: the kubelet's ErrImagePull.
type imageError struct{ err error }

func (e *imageError) Error() string { return e.err.Error() }

// prepare resolves the container's image, command line, environment and volumes.
func (p *pod) prepare(ctx context.Context, c *container) (launch, error) {
	im, err := p.agent.images.lookup(c.spec.Image)
	if err != nil {
		return launch{}, &imageError{err}
	}
	src := newSources(p.agent.client, p.spec.Namespace)
	env, err := environment(ctx, src, p.spec, &c.spec, p.net.PodIP)
	if err != nil {
		return launch{}, err
	}
	argv, err := im.argv(expandAll(c.spec.Command, env), expandAll(c.spec.Args, env))
	if err != nil {
		return launch{}, &configError{msg: err.Error()}
	}
	mounts, err := writeVolumes(ctx, src, p.spec, &c.spec, filepath.Join(p.dir, "volumes"))
	if err != nil {
		return launch{}, err
	}
	for _, m := range mounts {
		if err := p.agent.mountPoint(m); err != nil {
			return launch{}, err
		}
	}
	return launch{argv: argv, env: env, mounts: coveringLast(mounts)}, nil
}

// coveringLast orders mounts so that a mount whose target holds another mount's source
// (an emptyDir at /tmp, where the agent keeps the Pods' volumes) comes after it: once made,
// a bind mount survives its source being covered, but a source covered first is gone.
func coveringLast(mounts []mount) []mount {
	covers := func(m mount) bool {
		for _, o := range mounts {
			if o.source != m.source && (o.source == m.target || strings.HasPrefix(o.source, strings.TrimSuffix(m.target, "/")+"/")) {
				return true
			}
		}
		return false
	}
	out := make([]mount, 0, len(mounts))
	var last []mount
	for _, m := range mounts {
		if covers(m) {
			last = append(last, m)
		} else {
			out = append(out, m)
		}
	}
	return append(out, last...)
}

// startProcess runs the process in the Pod's network namespace, its output appended to the
// container's log, and returns a channel closed once it has exited and its state is
// recorded.
func (p *pod) startProcess(ctx context.Context, c *container, l launch) (<-chan struct{}, error) {
	args := []string{"netns", "exec", p.net.NS}
	if len(l.mounts) == 0 {
		args = append(args, l.argv...)
	} else {
		args = append(args, "/bin/sh", "-c", mountScript, "sh", p.agent.mountBin)
		for _, m := range l.mounts {
			args = append(args, m.source, m.target)
		}
		args = append(append(args, "--"), l.argv...)
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command("ip", args...)
	cmd.Env = l.env
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	c.mu.Lock()
	c.proc, c.exited = cmd.Process, exited
	c.id = fmt.Sprintf("portico://%s-%d", p.spec.UID, cmd.Process.Pid)
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	c.started = true
	c.ready = false
	c.mu.Unlock()
	if ctx.Err() != nil {
		// The Pod began stopping while this process started: stop may have looked for
		// it before it was recorded.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	p.log.Info("container started", "container", c.spec.Name, "pid", cmd.Process.Pid, "argv", l.argv)
	p.changed()
	go func() {
		err := cmd.Wait()
		code, reason := exitStatus(cmd.ProcessState, err)
		c.mu.Lock()
		started := c.state.Running
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, FinishedAt: metav1.Now(), ContainerID: c.id,
		}}
		if started != nil {
			c.state.Terminated.StartedAt = started.StartedAt
		}
		c.ready, c.started, c.proc = false, false, nil
		c.mu.Unlock()
		p.log.Info("container exited", "container", c.spec.Name, "exitCode", code, "reason", reason)
		close(exited)
	}()
	return exited, nil
}

func exitStatus(ps *os.ProcessState, err error) (int32, string) {
	if ps == nil {
		return 128, "Error: " + err.Error()
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal()), "Error"
	}
	if code := ps.ExitCode(); code != 0 {
		return int32(code), "Error"
	}
	return 0, "Completed"
}

// stop sends SIGTERM to the container's process group, and SIGKILL at deadline.
func (c *container) stop(deadline <-chan time.Time) {
	c.mu.Lock()
	proc, exited := c.proc, c.exited
	c.mu.Unlock()
	if proc == nil {
		return
	}
	_ = syscall.Kill(-proc.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-deadline:
		_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
		<-exited
	}
}

func (c *container) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
	}
}

// sleep waits d unless ctx ends first, and reports whether it waited all of d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoff doubles from base to max, as the kubelet's crash-loop backoff (whose 10s and
// 5 minutes Options may shorten for tests).
type backoff struct {
	base, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }
