package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fieldManager owns the fields the provisioner sets (server-side apply): a field an
// operator adds by hand (an annotation, say) is kept; one the provisioner sets is put back.
const fieldManager = "portico-provisioner"

// Provisioner keeps one data plane per Gateway: it applies each Gateway's Service and
// Deployment, and deletes those of Gateways that are gone. Only the leader runs it.
type Provisioner struct {
	client kubernetes.Interface
	opts   Options
	log    *slog.Logger

	mu sync.Mutex
	// applied is a digest of the objects last applied per Gateway: a build that
	// changes nothing about a Gateway's data plane costs no API call.
	applied map[types.NamespacedName]string
	// clean is true once a Sync with no Gateway found no data plane left: until a
	// Gateway appears, a cluster without Gateways costs no API call per build.
	clean bool
	// forbiddenLogged: RBAC refusals are explained once, not at every retry.
	forbiddenLogged bool
}

// New returns a Provisioner that creates data planes in opts.Namespace.
func New(client kubernetes.Interface, opts Options, log *slog.Logger) *Provisioner {
	return &Provisioner{client: client, opts: opts.withDefaults(), log: log, applied: map[types.NamespacedName]string{}}
}

// Sync makes the data planes those of gateways, the Gateways that are accepted: each
// one's Service and Deployment are applied when they differ from what was last applied,
// and the data planes of other Gateways are deleted. It returns how many operations
// failed (logged), to be retried by calling Sync again.
func (p *Provisioner) Sync(ctx context.Context, gateways []*gatewayv1.Gateway) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(gateways) == 0 && p.clean {
		return 0
	}
	p.clean = false
	failed := 0
	want := make(map[string]bool, len(gateways))
	for _, gw := range gateways {
		want[Name(key(gw))] = true
		if err := p.apply(ctx, gw); err != nil {
			failed += p.failure("cannot deploy the Gateway's data plane; retrying", err, "gateway", key(gw).String())
		}
	}
	n, err := p.deleteOthers(ctx, want)
	if err != nil {
		return failed + p.failure("cannot clean up the data planes of removed Gateways; retrying", err)
	}
	p.clean = len(gateways) == 0 && n == 0
	return failed
}

// failure logs err and returns 1, the failure to retry; or, for a refusal by RBAC that
// no retry will cure, says once how to fix it and returns 0.
func (p *Provisioner) failure(msg string, err error, args ...any) int {
	if apierrors.IsForbidden(err) {
		if !p.forbiddenLogged {
			p.forbiddenLogged = true
			p.log.Error("Gateways get no data plane: Portico may not manage Deployments and Services in its namespace. "+
				"Grant it (deploy/rbac.yaml's Role portico-gateway-data-planes) or run serve with --gateway-data-plane none and deploy them yourself",
				append(args, "namespace", p.opts.Namespace, "err", err)...)
		}
		return 0
	}
	p.log.Error(msg, append(args, "err", err)...)
	return 1
}

func (p *Provisioner) apply(ctx context.Context, gw *gatewayv1.Gateway) error {
	svc, dep := Service(gw, p.opts), Deployment(gw, p.opts)
	svcJSON, err := json.Marshal(svc)
	if err != nil {
		return err
	}
	depJSON, err := json.Marshal(dep)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(append(svcJSON, depJSON...))
	digest := hex.EncodeToString(sum[:])
	nn := key(gw)
	if p.applied[nn] == digest {
		return nil
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: ptr(true)}
	if _, err := p.client.CoreV1().Services(p.opts.Namespace).Patch(ctx, svc.Name, types.ApplyPatchType, svcJSON, opts); err != nil {
		return fmt.Errorf("Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if _, err := p.client.AppsV1().Deployments(p.opts.Namespace).Patch(ctx, dep.Name, types.ApplyPatchType, depJSON, opts); err != nil {
		return fmt.Errorf("Deployment %s/%s: %w", dep.Namespace, dep.Name, err)
	}
	p.applied[nn] = digest
	p.log.Info("Gateway data plane deployed", "gateway", nn.String(), "deployment", dep.Name, "data_plane", string(p.opts.DataPlane))
	return nil
}

// deleteOthers deletes the Deployments and Services the provisioner made whose names
// are not in want, forgets what it applied for them, and returns how many it found.
func (p *Provisioner) deleteOthers(ctx context.Context, want map[string]bool) (int, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: managedBy, LabelComponent: componentGateway}).String()
	list := metav1.ListOptions{LabelSelector: sel}
	deps, err := p.client.AppsV1().Deployments(p.opts.Namespace).List(ctx, list)
	if err != nil {
		return 0, err
	}
	svcs, err := p.client.CoreV1().Services(p.opts.Namespace).List(ctx, list)
	if err != nil {
		return 0, err
	}
	var stale []string
	var errs []error
	for _, d := range deps.Items {
		if !want[d.Name] {
			stale = append(stale, "Deployment "+d.Name)
			errs = append(errs, ignoreNotFound(p.client.AppsV1().Deployments(p.opts.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{})))
		}
	}
	for _, s := range svcs.Items {
		if !want[s.Name] {
			stale = append(stale, "Service "+s.Name)
			errs = append(errs, ignoreNotFound(p.client.CoreV1().Services(p.opts.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})))
		}
	}
	for _, nn := range slices.Collect(maps.Keys(p.applied)) {
		if !want[Name(nn)] {
			delete(p.applied, nn)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return len(stale), err
	}
	if len(stale) > 0 {
		p.log.Info("data planes of removed Gateways deleted", "objects", stale)
	}
	return len(stale), nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
