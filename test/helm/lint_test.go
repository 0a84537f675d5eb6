package helm

import (
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

// TestLint runs `helm lint --strict` through the SDK, for the default values and for
// values that turn every option away from its default: a warning fails as an error would
// (deprecated APIs, templates that do not render or parse, Chart.yaml and values.yaml
// problems, CRDs that are not CRDs). Information (no icon) is logged only.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults":     nil,
		"non-defaults": values(t, nonDefaultValues),
	} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = "edge-system"
			res := lint.Run([]string{chartDir()}, vals)
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", res.TotalChartsLinted)
			}
			for _, m := range res.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("lint: %v", m)
				} else {
					t.Logf("lint: %v", m)
				}
			}
			for _, err := range res.Errors {
				t.Errorf("lint: %v", err)
			}
		})
	}
}

// nonDefaultValues moves every value the chart has away from its default at once (the
// other tests take them one by one).
const nonDefaultValues = `
image: {repository: registry.example.com/portico, tag: v0.7.0, digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", pullPolicy: Always}
imagePullSecrets: [{name: regcred}]
controller:
  replicas: 3
  resources: {requests: {cpu: 250m, memory: 256Mi}, limits: {memory: 1Gi}}
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: dedicated, operator: Equal, value: ingress, effect: NoSchedule}]
  extraArgs: [--log-format, json]
envoy:
  image: {repository: registry.example.com/envoy, tag: v1.36.2, digest: "", pullPolicy: Always}
  logLevel: warning
  resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {memory: 2Gi}}
  bootstrapResources: {requests: {cpu: 20m, memory: 32Mi}, limits: {memory: 32Mi}}
  nodeSelector: {node-role.example.com/edge: "true"}
  tolerations: [{key: dedicated, operator: Equal, value: ingress, effect: NoSchedule}]
  service: {type: NodePort, externalTrafficPolicy: Cluster, annotations: {example.com/lb: internal}}
ingressClass: {name: edge, create: true, default: true}
watchNamespaces: [team-a, team-b]
rootNamespaces: [platform]
ingressStatusAddress: [edge.example.com]
webhook: {enabled: false}
networkPolicy: {enabled: false, webhookFrom: [{ipBlock: {cidr: 10.0.0.0/16}}]}
`
