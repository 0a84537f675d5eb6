package nodeagent

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseDuration is the node Lease's duration; it is renewed every quarter of it.
const leaseDuration = 40 * time.Second

// allocatable is what the node offers: ample for tests (nothing enforces it, the Pods
// are bound without a scheduler).
func allocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("64"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("1000"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
}

// register creates the Node (or takes over one of the same name left by an earlier
// agent) and marks it Ready.
func (a *Agent) register(ctx context.Context) error {
	nodes := a.client.CoreV1().Nodes()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: a.opts.NodeName,
		Labels: map[string]string{
			corev1.LabelHostname:   a.opts.NodeName,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: "amd64",
		},
	}}
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = nodes.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	created.Status = a.nodeStatus()
	if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return a.renewLease(ctx)
}

func (a *Agent) nodeStatus() corev1.NodeStatus {
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Capacity:    allocatable(),
		Allocatable: allocatable(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "the Portico test node agent is running"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: NodeIP},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(a.logs.port)}},
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem:         "linux",
			Architecture:            "amd64",
			KubeletVersion:          "v1.37.1",
			ContainerRuntimeVersion: "portico-nodeagent://0",
		},
	}
}

// heartbeat renews the node Lease until the agent stops. Nothing watches it here (no
// node lifecycle controller), but a reader of the Node sees a live one.
func (a *Agent) heartbeat() {
	t := time.NewTicker(leaseDuration / 4)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
			if err := a.renewLease(a.ctx); err != nil && a.ctx.Err() == nil {
				a.log.Warn("renewing the node lease", "err", err)
			}
		}
	}
}

func (a *Agent) renewLease(ctx context.Context) error {
	leases := a.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		seconds := int32(leaseDuration / time.Second)
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.opts.NodeName},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       &a.opts.NodeName,
				LeaseDurationSeconds: &seconds,
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
