package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// GatewayAPIModule is the Go module whose config/crd holds the Gateway API CRDs of the
// release Portico is built against.
const GatewayAPIModule = "sigs.k8s.io/gateway-api"

// A GatewayAPIChannel is a release channel of the Gateway API CRDs.
type GatewayAPIChannel string

const (
	// GatewayAPIStandard is the standard channel: every kind Portico reads (ListenerSet and
	// TLSRoute included) at v1, with the GA fields.
	GatewayAPIStandard GatewayAPIChannel = "standard"
	// GatewayAPIExperimental adds the experimental fields and versions to the standard
	// kinds, and the experimental kinds.
	GatewayAPIExperimental GatewayAPIChannel = "experimental"
)

// gatewayChannelAnnotation says which channel an installed Gateway API CRD is of.
const gatewayChannelAnnotation = "gateway.networking.k8s.io/channel"

// The ValidatingAdmissionPolicy of the release (safe upgrades) and its binding.
var (
	vapResource        = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	vapBindingResource = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// GatewayAPIDir returns the directory of the Gateway API module this test binary is
// built with, in the module cache: the version the binary links (its build information),
// under GOMODCACHE as the go command reports it.
func GatewayAPIDir() (string, error) {
	version, err := linkedVersion(GatewayAPIModule)
	if err != nil {
		return "", err
	}
	cache, err := modCache()
	if err != nil {
		return "", err
	}
	escaped, err := escapeModulePath(GatewayAPIModule)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, escaped+"@"+version)
	if _, err := os.Stat(filepath.Join(dir, "config", "crd")); err != nil {
		return "", fmt.Errorf("kubetest: the Gateway API CRDs of %s@%s are not in the module cache (%w); run go mod download %s", GatewayAPIModule, version, err, GatewayAPIModule)
	}
	return dir, nil
}

// linkedVersion is the version of module in this binary's build information.
func linkedVersion(module string) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("kubetest: no build information in this binary")
	}
	for _, dep := range info.Deps {
		if dep.Path == module {
			if dep.Replace != nil {
				return dep.Replace.Version, nil
			}
			return dep.Version, nil
		}
	}
	return "", fmt.Errorf("kubetest: %s is not linked into this binary", module)
}

// modCache asks the go command for GOMODCACHE, from outside any module so that the
// go.mod's toolchain line plays no part.
func modCache() (string, error) {
	if dir := os.Getenv("GOMODCACHE"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("go", "env", "GOMODCACHE")
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubetest: go env GOMODCACHE: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("kubetest: go env GOMODCACHE is empty")
	}
	return dir, nil
}

// escapeModulePath is the module cache's spelling of a path: an upper-case letter
// becomes '!' and its lower case.
func escapeModulePath(path string) (string, error) {
	var b strings.Builder
	for _, r := range path {
		switch {
		case r >= 'A' && r <= 'Z':
			b.WriteByte('!')
			b.WriteRune(r + ('a' - 'A'))
		case r > 0x7f:
			return "", fmt.Errorf("kubetest: module path %q is not ASCII", path)
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// GatewayAPIFiles returns the channel's manifests of the gateway.networking.k8s.io API
// group from the module: its CRDs, and last the file of the ValidatingAdmissionPolicy
// that guards upgrades (as the release's kustomization lists them).
func GatewayAPIFiles(channel GatewayAPIChannel) (crds []string, policy string, err error) {
	dir, err := GatewayAPIDir()
	if err != nil {
		return nil, "", err
	}
	base := filepath.Join(dir, "config", "crd", string(channel))
	crds, err = filepath.Glob(filepath.Join(base, "gateway.networking.k8s.io_*.yaml"))
	if err != nil {
		return nil, "", err
	}
	policy = filepath.Join(base, "gateway.networking.k8s.io_vap_safeupgrades.yaml")
	var out []string
	for _, f := range crds {
		if f != policy {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("kubetest: no Gateway API CRDs in %s", base)
	}
	return out, policy, nil
}

// InstallGatewayAPICRDs installs the Gateway API CRDs of channel from the module, with the
// release's ValidatingAdmissionPolicy, and returns once they are established. Installing
// them again is harmless, and the standard channel is taken as installed when the
// experimental one (a superset) is. The policy refuses experimental CRDs over standard
// ones, as it would in a cluster: a test binary that needs the experimental channel asks
// for it before any test installs the standard one. It skips t under -short.
func (e *Env) InstallGatewayAPICRDs(t testing.TB, channel GatewayAPIChannel) {
	t.Helper()
	e.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := InstallGatewayAPI(ctx, e.Config, channel); err != nil {
		t.Fatal(err)
	}
}

// InstallGatewayAPI installs the Gateway API CRDs of channel and the release's
// ValidatingAdmissionPolicy (see Env.InstallGatewayAPICRDs).
func InstallGatewayAPI(ctx context.Context, cfg *rest.Config, channel GatewayAPIChannel) error {
	if channel == GatewayAPIStandard {
		if ch, err := installedGatewayChannel(ctx, cfg); err != nil {
			return err
		} else if ch == GatewayAPIExperimental {
			return nil
		}
	}
	crds, policy, err := GatewayAPIFiles(channel)
	if err != nil {
		return err
	}
	if err := InstallCRDs(ctx, cfg, crds...); err != nil {
		return err
	}
	return applyPolicy(ctx, cfg, policy)
}

// installedGatewayChannel returns the channel of the installed HTTPRoute CRD, "" when none.
func installedGatewayChannel(ctx context.Context, cfg *rest.Config) (GatewayAPIChannel, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	crd, err := dyn.Resource(crdResource).Get(ctx, "httproutes.gateway.networking.k8s.io", metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return GatewayAPIChannel(crd.GetAnnotations()[gatewayChannelAnnotation]), nil
}

// applyPolicy applies the ValidatingAdmissionPolicy and its binding in file.
func applyPolicy(ctx context.Context, cfg *rest.Config, file string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for i, doc := range strings.Split(string(data), "\n---") {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return fmt.Errorf("kubetest: %s: document %d: %w", file, i+1, err)
		}
		if string(js) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := json.Unmarshal(js, &obj.Object); err != nil {
			return fmt.Errorf("kubetest: %s: document %d: %w", file, i+1, err)
		}
		var res schema.GroupVersionResource
		switch obj.GetKind() {
		case "ValidatingAdmissionPolicy":
			res = vapResource
		case "ValidatingAdmissionPolicyBinding":
			res = vapBindingResource
		default:
			return fmt.Errorf("kubetest: %s: document %d is a %s, not a ValidatingAdmissionPolicy or its binding", file, i+1, obj.GetKind())
		}
		if _, err := dyn.Resource(res).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: CRDFieldManager, Force: true}); err != nil {
			return fmt.Errorf("kubetest: applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
		}
	}
	return nil
}
