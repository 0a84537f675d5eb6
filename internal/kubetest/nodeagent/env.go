package nodeagent

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// defaultPath is the PATH of a container whose image says nothing (as distroless's).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// configError is a container that cannot be started as specified (a missing Secret key,
// an unsupported field): the kubelet's CreateContainerConfigError.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// sources reads the Secrets and ConfigMaps a container refers to, once each.
type sources struct {
	client     kubernetes.Interface
	namespace  string
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

func newSources(c kubernetes.Interface, namespace string) *sources {
	return &sources{client: c, namespace: namespace, secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}}
}

// secret returns the Secret's data, nil when it does not exist.
func (s *sources) secret(ctx context.Context, name string) (map[string][]byte, error) {
	if sec, ok := s.secrets[name]; ok {
		return dataOf(sec), nil
	}
	sec, err := s.client.CoreV1().Secrets(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sec, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.secrets[name] = sec
	return dataOf(sec), nil
}

func dataOf(sec *corev1.Secret) map[string][]byte {
	if sec == nil {
		return nil
	}
	return sec.Data
}

// configMap returns the ConfigMap's data (binary data included), nil when it does not exist.
func (s *sources) configMap(ctx context.Context, name string) (map[string][]byte, error) {
	cm, ok := s.configMaps[name]
	if !ok {
		var err error
		cm, err = s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		s.configMaps[name] = cm
	}
	if cm == nil {
		return nil, nil
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return data, nil
}

// environment returns the container's environment as the kubelet builds it: envFrom,
// then env in order, with $(VAR) references to earlier variables expanded.
func environment(ctx context.Context, src *sources, pod *corev1.Pod, c *corev1.Container, podIP string) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		data, optional, what, err := envFromSource(ctx, src, from)
		if err != nil {
			return nil, err
		}
		if data == nil {
			if optional {
				continue
			}
			return nil, configErrorf("%s not found", what)
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			set(from.Prefix+k, string(data[k]))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, ok, err := envValueFrom(ctx, src, pod, c, podIP, e)
		if err != nil {
			return nil, err
		}
		if ok {
			set(e.Name, v)
		}
	}
	env := []string{defaultPath, "HOSTNAME=" + pod.Name}
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

func envFromSource(ctx context.Context, src *sources, from corev1.EnvFromSource) (map[string][]byte, bool, string, error) {
	switch {
	case from.SecretRef != nil:
		data, err := src.secret(ctx, from.SecretRef.Name)
		return data, ptrTrue(from.SecretRef.Optional), "Secret " + from.SecretRef.Name, err
	case from.ConfigMapRef != nil:
		data, err := src.configMap(ctx, from.ConfigMapRef.Name)
		return data, ptrTrue(from.ConfigMapRef.Optional), "ConfigMap " + from.ConfigMapRef.Name, err
	}
	return nil, false, "", configErrorf("envFrom: only secretRef and configMapRef are supported")
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// envValueFrom resolves one valueFrom; ok is false for a missing optional key.
func envValueFrom(ctx context.Context, src *sources, pod *corev1.Pod, c *corev1.Container, podIP string, e corev1.EnvVar) (string, bool, error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := fieldValue(pod, vf.FieldRef.FieldPath, podIP)
		return v, err == nil, err
	case vf.ResourceFieldRef != nil:
		v, err := resourceValue(c, vf.ResourceFieldRef)
		return v, err == nil, err
	case vf.SecretKeyRef != nil:
		data, err := src.secret(ctx, vf.SecretKeyRef.Name)
		return keyValue(data, err, "Secret", vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, ptrTrue(vf.SecretKeyRef.Optional), e.Name)
	case vf.ConfigMapKeyRef != nil:
		data, err := src.configMap(ctx, vf.ConfigMapKeyRef.Name)
		return keyValue(data, err, "ConfigMap", vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, ptrTrue(vf.ConfigMapKeyRef.Optional), e.Name)
	}
	return "", false, configErrorf("env %s: valueFrom kind not supported by the test node agent", e.Name)
}

func keyValue(data map[string][]byte, err error, kind, name, key string, optional bool, env string) (string, bool, error) {
	if err != nil {
		return "", false, err
	}
	v, ok := data[key]
	if !ok {
		if optional {
			return "", false, nil
		}
		if data == nil {
			return "", false, configErrorf("env %s: %s %q not found", env, kind, name)
		}
		return "", false, configErrorf("env %s: couldn't find key %s in %s %s", env, key, kind, name)
	}
	return string(v), true, nil
}

// fieldValue is the downward API's fieldRef.
func fieldValue(pod *corev1.Pod, path, podIP string) (string, error) {
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return NodeIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return "", configErrorf("fieldRef %q is not supported by the test node agent", path)
}

// subscript parses prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// resourceValue is resourceFieldRef for a container's own limits and requests; an unset
// limit reads as the node's allocatable, as on a kubelet.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", configErrorf("resourceFieldRef %q is not supported by the test node agent", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		q, ok = allocatable()[corev1.ResourceName(name)]
	}
	if !ok {
		return "0", nil
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		if name == "cpu" {
			return fmt.Sprint((q.MilliValue() + 999) / 1000), nil
		}
		return fmt.Sprint(q.Value()), nil
	}
	return fmt.Sprint((q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()), nil
}

// expand replaces $(NAME) by an earlier variable's value and $$ by $, leaving
// references to unknown names as they are (the kubelet's rules).
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// expandAll expands each of args with the container's environment.
func expandAll(args []string, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, vars)
	}
	return out
}

// mount is a bind mount of a prepared volume directory (or a file in it, for subPath)
// at a container's mount path.
type mount struct{ source, target string }

// writeVolumes fills dir/<volume> with each Secret, ConfigMap and emptyDir volume of
// the pod that c mounts, and returns the mounts.
func writeVolumes(ctx context.Context, src *sources, pod *corev1.Pod, c *corev1.Container, dir string) ([]mount, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	var mounts []mount
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			return nil, configErrorf("volume mount %s: no volume of that name", vm.Name)
		}
		vdir := filepath.Join(dir, v.Name)
		if err := fillVolume(ctx, src, v, vdir); err != nil {
			return nil, err
		}
		source := vdir
		if vm.SubPath != "" {
			if !filepath.IsLocal(vm.SubPath) {
				return nil, configErrorf("volume mount %s: subPath %q leaves the volume", vm.Name, vm.SubPath)
			}
			source = filepath.Join(vdir, vm.SubPath)
		}
		if !filepath.IsAbs(vm.MountPath) {
			return nil, configErrorf("volume mount %s: mountPath %q is not absolute", vm.Name, vm.MountPath)
		}
		mounts = append(mounts, mount{source: source, target: filepath.Clean(vm.MountPath)})
	}
	return mounts, nil
}

// fillVolume writes a volume's files once per pod (every container sees the same
// content, as on a kubelet; later changes of the Secret or ConfigMap are not followed).
func fillVolume(ctx context.Context, src *sources, v corev1.Volume, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	var data map[string][]byte
	var items []corev1.KeyToPath
	mode := int32(0o644)
	switch {
	case v.EmptyDir != nil:
		mode = 0o777
	case v.Secret != nil:
		d, err := src.secret(ctx, v.Secret.SecretName)
		if err != nil {
			return err
		}
		if d == nil && !ptrTrue(v.Secret.Optional) {
			return configErrorf("volume %s: Secret %q not found", v.Name, v.Secret.SecretName)
		}
		data, items = d, v.Secret.Items
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
	case v.ConfigMap != nil:
		d, err := src.configMap(ctx, v.ConfigMap.Name)
		if err != nil {
			return err
		}
		if d == nil && !ptrTrue(v.ConfigMap.Optional) {
			return configErrorf("volume %s: ConfigMap %q not found", v.Name, v.ConfigMap.Name)
		}
		data, items = d, v.ConfigMap.Items
		if v.ConfigMap.DefaultMode != nil {
			mode = *v.ConfigMap.DefaultMode
		}
	default:
		return configErrorf("volume %s: only secret, configMap and emptyDir volumes are supported by the test node agent", v.Name)
	}
	if err := writeKeys(tmp, data, items, os.FileMode(mode)); err != nil {
		return err
	}
	if v.EmptyDir != nil {
		if err := os.Chmod(tmp, 0o777); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dir)
}

func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, mode os.FileMode) error {
	if items == nil {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return configErrorf("key %s not found", it.Key)
		}
		if !filepath.IsLocal(it.Path) {
			return configErrorf("item path %q leaves the volume", it.Path)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		p := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, v, m); err != nil {
			return err
		}
	}
	return nil
}
