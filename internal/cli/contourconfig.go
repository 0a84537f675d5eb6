package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// The keys of Contour's configuration file (the file of `contour serve --config-path`,
// Contour v1.33), each mapped to the flag that means the same in Portico, or refused
// with what to do instead: a setting is never silently dropped. docs/contour-config.md
// is the table a user reads; TestContourConfigKeys holds every key to it.

// rule turns the value v of the key k (at path, such as "timeouts.connect-timeout")
// into settings, or says why it cannot.
type rule interface {
	apply(path string, k, v *yaml.Node, out *[]setting) error
}

// ruleFunc is a rule of a single key.
type ruleFunc func(path string, k, v *yaml.Node, out *[]setting) error

func (f ruleFunc) apply(path string, k, v *yaml.Node, out *[]setting) error {
	return f(path, k, v, out)
}

// contourKeys are the top-level keys of Contour's configuration file. Contour's
// serve flags root-namespaces, watch-namespaces and ingress-class-name are Portico's
// flag names too, so the flag-name form already covers them.
var contourKeys = map[string]rule{
	"debug":                 asFlag("log-level", debugLevel),
	"incluster":             ruleFunc(inCluster),
	"kubeconfig":            asFlag("kubeconfig", str),
	"kubernetesClientQPS":   asFlag("kube-api-qps", number),
	"kubernetesClientBurst": asFlag("kube-api-burst", wholeNumber),
	"server": section{
		// Contour before v1.33 chose between two xDS server implementations; both serve
		// the same protocol, as Portico's one server does.
		"xds-server-type": only([]string{"envoy", "contour"}, "Portico has one xDS server"),
	},
	"gateway":                 refuse("Portico serves every Gateway whose GatewayClass names its controller (portico.dev/gateway-controller) rather than one Gateway named here: remove gatewayRef and point the Gateway's class at Portico"),
	"ingress-status-address":  asFlag("ingress-status-address", str),
	"accesslog-format":        only([]string{"envoy"}, "the access log is Envoy's default format on Envoy and Portico's structured lines on the embedded proxy (docs/metrics.md); JSON access logs are not supported yet"),
	"accesslog-format-string": refuse("custom access log formats are not supported yet: Envoy writes its default format"),
	"json-fields":             refuse("JSON access logs are not supported yet"),
	"accesslog-level":         only([]string{"info"}, "every request is logged; filtering the access log by status is not supported yet"),
	"tls": section{
		"minimum-protocol-version": asFlag("tls-minimum-protocol-version", tlsVersion),
		"maximum-protocol-version": asFlag("tls-maximum-protocol-version", tlsVersion),
		"cipher-suites":            asFlag("tls-cipher-suites", cipherSuites),
		"fallback-certificate":     asFlag("fallback-certificate", namespacedName),
		"envoy-client-certificate": asFlag("envoy-client-certificate", namespacedName),
	},
	"disablePermitInsecure":     asFlag("disable-permit-insecure", boolean),
	"disableAllowChunkedLength": refuse("not supported yet: requests with both Content-Length and Transfer-Encoding: chunked are handled as Envoy's and Go's defaults do"),
	"disableMergeSlashes":       asFlag("disable-merge-slashes", boolean),
	"compression": section{
		"algorithm": asFlag("compression", compressionAlgorithm),
	},
	"serverHeaderTransformation": asFlag("server-header-transformation", serverHeader),
	"enableExternalNameService":  asFlag("enable-external-name-services", boolean),
	"timeouts": section{
		"request-timeout":                  asFlag("request-timeout", contourTimeout),
		"connection-idle-timeout":          asFlag("connection-idle-timeout", contourTimeout),
		"stream-idle-timeout":              asFlag("stream-idle-timeout", contourTimeout),
		"max-connection-duration":          asFlag("max-connection-duration", contourTimeout),
		"delayed-close-timeout":            asFlag("delayed-close-timeout", contourTimeout),
		"connection-shutdown-grace-period": asFlag("connection-shutdown-grace-period", contourTimeout),
		"connect-timeout":                  asFlag("connect-timeout", duration),
	},
	"policy": section{
		"request-headers":  asFlag("request-headers-policy", asJSON),
		"response-headers": asFlag("response-headers-policy", asJSON),
		"applyToIngress":   applyToIngress,
	},
	"envoy-service-namespace": pair(envoyServiceR, 0, dnsLabel),
	"envoy-service-name":      pair(envoyServiceR, 1, dnsLabel),
	"default-http-versions":   asFlag("default-http-versions", httpVersions),
	"cluster": section{
		"dns-lookup-family":                 asFlag("dns-lookup-family", dnsFamily),
		"max-requests-per-connection":       refuse("not supported yet: connections to backends are reused without a request limit"),
		"per-connection-buffer-limit-bytes": refuse("not supported yet: Envoy's default buffer limit (1 MiB) applies"),
		"circuit-breakers": section{
			"max-connections":          asFlag("default-max-connections", wholeNumber),
			"max-pending-requests":     asFlag("default-max-pending-requests", wholeNumber),
			"max-requests":             asFlag("default-max-requests", wholeNumber),
			"max-retries":              asFlag("default-max-retries", wholeNumber),
			"per-host-max-connections": asFlag("default-per-host-max-connections", wholeNumber),
		},
		"upstream-tls": section{
			"minimum-protocol-version": asFlag("upstream-tls-minimum-protocol-version", tlsVersion),
			"maximum-protocol-version": asFlag("upstream-tls-maximum-protocol-version", tlsVersion),
			"cipher-suites":            asFlag("upstream-tls-cipher-suites", cipherSuites),
		},
	},
	"network": section{
		"num-trusted-hops":        asFlag("num-trusted-hops", wholeNumber),
		"admin-port":              refuse("Envoy's admin interface is set in its bootstrap: portico bootstrap --admin-address; remove it here"),
		"strip-trailing-host-dot": asFlag("strip-trailing-host-dot", boolean),
	},
	"listener":                 refuse("listener tuning (connection-balancer, max-requests-per-connection, per-connection-buffer-limit-bytes, socket-options, max-requests-per-io-cycle, http2-max-concurrent-streams, max-connections-per-listener) is not supported yet: Envoy's defaults apply"),
	"rateLimitService":         rateLimitSection(),
	"globalExtAuth":            ruleFunc(globalExtAuthFile),
	"metrics":                  refuse("Portico serves its metrics at /metrics on --admin-addr: set admin-addr instead; Envoy's metrics are on its admin interface (portico bootstrap)"),
	"tracing":                  refuse("tracing is not supported yet"),
	"featureFlags":             emptyList("Contour's feature flags have no counterpart: Portico reads EndpointSlices always"),
	"omEnforcedHealthListener": refuse("not supported yet: the overload manager is not configured"),
	// ContourConfiguration's spelling (spec.ingress) of the ingress flags.
	"ingress": section{
		"classNames":    asFlag("ingress-class-name", classNames),
		"statusAddress": asFlag("ingress-status-address", str),
	},
}

// applyToIngress gives the installation's headers policies to Ingress backends too.
var applyToIngress = asFlag("headers-policy-ingress", boolean)

func rateLimitSection() section {
	return section{
		"extensionService":             asFlag("rate-limit-extension-service", slashName),
		"domain":                       asFlag("rate-limit-domain", str),
		"failOpen":                     asFlag("rate-limit-fail-open", boolean),
		"enableXRateLimitHeaders":      asFlag("rate-limit-x-headers", boolean),
		"enableResourceExhaustedCode":  asFlag("rate-limit-resource-exhausted", boolean),
		"defaultGlobalRateLimitPolicy": asFlag("rate-limit-default-global-policy", asJSON),
	}
}

// section is the rule of a mapping whose keys have rules of their own.
type section map[string]rule

func (keys section) apply(path string, _, v *yaml.Node, out *[]setting) error {
	if v.Kind != yaml.MappingNode {
		if isNull(v) {
			return nil
		}
		return fmt.Errorf("line %d: %s: a mapping is expected, got a %s", v.Line, path, kindName(v.Kind))
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		r, ok := keys[k.Value]
		sub := k.Value
		if path != "" {
			sub = path + "." + k.Value
		}
		if !ok {
			return fmt.Errorf("line %d: unknown setting %s (the keys of %s are %s)", k.Line, sub, cmp.Or(path, "the file"), strings.Join(sortedKeys(keys), ", "))
		}
		if err := r.apply(sub, k, val, out); err != nil {
			return err
		}
	}
	return nil
}

// asFlag is a rule that sets flag to what conv makes of the value ("" sets nothing).
func asFlag(flag string, conv func(v *yaml.Node) (string, error)) rule {
	return ruleFunc(func(path string, k, v *yaml.Node, out *[]setting) error {
		val, err := conv(v)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", v.Line, path, err)
		}
		if val != "" {
			*out = append(*out, setting{flag: flag, value: val, key: path, line: k.Line})
		}
		return nil
	})
}

// refuse is a rule for a setting Portico has no equivalent for yet.
func refuse(why string) rule {
	return ruleFunc(func(path string, k, _ *yaml.Node, _ *[]setting) error {
		return fmt.Errorf("line %d: %s: %s", k.Line, path, why)
	})
}

// only accepts the values that mean what Portico does anyway, and refuses the others.
func only(values []string, why string) rule {
	return ruleFunc(func(path string, k, v *yaml.Node, _ *[]setting) error {
		if v.Kind == yaml.ScalarNode {
			for _, ok := range values {
				if strings.EqualFold(v.Value, ok) {
					return nil
				}
			}
		}
		return fmt.Errorf("line %d: %s: %q is not supported (only %s): %s", k.Line, path, v.Value, strings.Join(values, ", "), why)
	})
}

// emptyList accepts an empty list only.
func emptyList(why string) rule {
	return ruleFunc(func(path string, k, v *yaml.Node, _ *[]setting) error {
		if isNull(v) || (v.Kind == yaml.SequenceNode && len(v.Content) == 0) {
			return nil
		}
		return fmt.Errorf("line %d: %s: %s; remove it", k.Line, path, why)
	})
}

func sortedKeys(m map[string]rule) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func isNull(v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.Tag == "!!null" }

func scalar(v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("a single value is expected, got a %s", kindName(v.Kind))
	}
	return v.Value, nil
}

func str(v *yaml.Node) (string, error) { return scalar(v) }

func boolean(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	b, err := strconv.ParseBool(s)
	if err != nil || v.Tag == "!!str" {
		return "", fmt.Errorf("%q is not true or false", s)
	}
	return strconv.FormatBool(b), nil
}

func debugLevel(v *yaml.Node) (string, error) {
	b, err := boolean(v)
	if err != nil || b == "false" {
		return "", err
	}
	return "debug", nil
}

// inCluster: true uses the in-cluster configuration, which Portico does without a
// kubeconfig (--kubeconfig ""); false leaves --kubeconfig alone.
func inCluster(path string, k, v *yaml.Node, out *[]setting) error {
	b, err := boolean(v)
	if err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, path, err)
	}
	if b == "true" {
		*out = append(*out, setting{flag: "kubeconfig", key: path, line: k.Line})
	}
	return nil
}

func number(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	if f, err := strconv.ParseFloat(s, 64); err != nil || f <= 0 {
		return "", fmt.Errorf("%q is not a positive number", s)
	}
	return s, nil
}

func wholeNumber(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	if _, err := strconv.ParseUint(s, 10, 32); err != nil {
		return "", fmt.Errorf("%q is not a whole number from 0 to %d", s, uint32(1<<32-1))
	}
	return s, nil
}

// timeout is a duration where infinity (no timeout) is allowed, written as 0.
func timeout(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	d, err := parseTimeout(s)
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// contourTimeout is a timeout as Contour reads it: infinity (or infinite) disables it
// (0), and a zero duration, like the key left out, keeps the default (no setting).
func contourTimeout(v *yaml.Node) (string, error) {
	s, err := timeout(v)
	if err != nil || s != "0s" {
		return s, err
	}
	if v.Value == "infinity" || v.Value == "infinite" {
		return s, nil
	}
	return "", nil
}

// duration is a duration that must be finite and above 0.
func duration(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	d, err := parseTimeout(s)
	if err != nil || d == 0 {
		return "", fmt.Errorf("%q is not a duration above 0 such as 2s or 500ms", s)
	}
	return d.String(), nil
}

func tlsVersion(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	if _, err := translate.ParseTLSVersion(s); err != nil {
		return "", err
	}
	return s, nil
}

// cipherSuites is a list of Contour's TLS 1.2 cipher suite names (or [A|B] groups).
func cipherSuites(v *yaml.Node) (string, error) {
	s, err := list(v)
	if err != nil {
		return "", err
	}
	return s, translate.CheckCipherSuites(splitList(s))
}

func httpVersions(v *yaml.Node) (string, error) {
	s, err := list(v)
	if err != nil {
		return "", err
	}
	_, err = parseHTTPVersions(s)
	return s, err
}

// list is a YAML list of plain values, as a flag's comma-separated value.
func list(v *yaml.Node) (string, error) {
	if v.Kind != yaml.SequenceNode {
		return "", fmt.Errorf("a list is expected, got a %s", kindName(v.Kind))
	}
	return flagValue(v)
}

func dnsFamily(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	if err := translate.CheckGlobal(translate.Global{DNSLookupFamily: s}); err != nil {
		return "", err
	}
	return s, nil
}

// serverHeader is Contour's serverHeaderTransformation, checked as the flag is.
var serverHeader = globalSetting(func(g *translate.Global, s string) { g.ServerHeader = translate.ServerHeaderTransformation(s) })

// compressionAlgorithm is Contour's compression.algorithm: gzip, brotli, zstd or
// disabled.
var compressionAlgorithm = globalSetting(func(g *translate.Global, s string) { g.Compression = translate.Compression(s) })

// globalSetting converts a scalar that set puts in a translate.Global, which
// checks it as the flag's value is checked.
func globalSetting(set func(g *translate.Global, s string)) func(v *yaml.Node) (string, error) {
	return func(v *yaml.Node) (string, error) {
		s, err := scalar(v)
		if err != nil {
			return "", err
		}
		var g translate.Global
		set(&g, s)
		if err := translate.CheckGlobal(g); err != nil {
			return "", err
		}
		return s, nil
	}
}

// namespacedName is Contour's {namespace, name} of a Secret, as NAMESPACE/NAME.
func namespacedName(v *yaml.Node) (string, error) {
	if v.Kind != yaml.MappingNode {
		return "", fmt.Errorf("{namespace: NS, name: NAME} is expected, got a %s", kindName(v.Kind))
	}
	var ref struct{ Namespace, Name string }
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		var err error
		switch k.Value {
		case "namespace":
			ref.Namespace, err = dnsLabel(val)
		case "name":
			ref.Name, err = scalar(val)
		default:
			return "", fmt.Errorf("unknown key %q (namespace and name are expected)", k.Value)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", k.Value, err)
		}
	}
	if ref.Namespace == "" || ref.Name == "" {
		return "", fmt.Errorf("both namespace and name are needed")
	}
	if errs := validation.IsDNS1123Subdomain(ref.Name); len(errs) > 0 {
		return "", fmt.Errorf("name %q: %s", ref.Name, strings.Join(errs, "; "))
	}
	return ref.Namespace + "/" + ref.Name, nil
}

// dnsLabel is a scalar that must be a namespace-like name (a DNS-1123 label).
func dnsLabel(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return "", fmt.Errorf("%q: %s", s, strings.Join(errs, "; "))
	}
	return s, nil
}

// classNames is a list of ingress class names, every one served, as
// --ingress-class-name's comma-separated value.
func classNames(v *yaml.Node) (string, error) {
	if v.Kind != yaml.SequenceNode {
		return "", fmt.Errorf("a list is expected, got a %s", kindName(v.Kind))
	}
	names := make([]string, 0, len(v.Content))
	for _, n := range v.Content {
		name, err := scalar(n)
		if err != nil {
			return "", err
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return "", fmt.Errorf("%q: %s", name, strings.Join(errs, "; "))
		}
		names = append(names, name)
	}
	return strings.Join(names, ","), nil
}

func asJSON(v *yaml.Node) (string, error) {
	if v.Kind != yaml.MappingNode {
		return "", fmt.Errorf("a mapping is expected, got a %s", kindName(v.Kind))
	}
	return flagValue(v)
}

// slashName is Contour's NAMESPACE/NAME of an object.
func slashName(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || validation.IsDNS1123Label(ns) != nil || validation.IsDNS1123Subdomain(name) != nil {
		return "", fmt.Errorf("%q is not NAMESPACE/NAME", s)
	}
	return s, nil
}

// globalExtAuthFile is the rule of the file's globalExtAuth, whose extensionService
// (NAMESPACE/NAME) is the extensionRef of --global-ext-auth's form.
func globalExtAuthFile(path string, k, v *yaml.Node, out *[]setting) error {
	m, err := decodeMapping(path, v)
	if err != nil {
		return err
	}
	for key := range m {
		switch key {
		case "extensionService", "authPolicy", "responseTimeout", "failOpen", "withRequestBody":
		default:
			return fmt.Errorf("line %d: unknown setting %s.%s (the keys of %s are authPolicy, extensionService, failOpen, responseTimeout, withRequestBody)", v.Line, path, key, path)
		}
	}
	if es, ok := m["extensionService"].(string); ok {
		ns, name, _ := strings.Cut(es, "/")
		m["extensionRef"] = map[string]string{"namespace": ns, "name": name}
		delete(m, "extensionService")
	}
	return globalExtAuthValue(path, k, v, m, out)
}

// globalExtAuthSpec is the rule of a ContourConfiguration's spec.globalExtAuth, which
// has --global-ext-auth's form.
func globalExtAuthSpec(path string, k, v *yaml.Node, out *[]setting) error {
	m, err := decodeMapping(path, v)
	if err != nil {
		return err
	}
	return globalExtAuthValue(path, k, v, m, out)
}

// decodeMapping is the mapping v, the value of the key at path.
func decodeMapping(path string, v *yaml.Node) (map[string]any, error) {
	if v.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: %s: a mapping is expected, got a %s", v.Line, path, kindName(v.Kind))
	}
	var m map[string]any
	if err := v.Decode(&m); err != nil {
		return nil, fmt.Errorf("line %d: %s: %w", v.Line, path, err)
	}
	return m, nil
}

// globalExtAuthValue sets --global-ext-auth to m, checked.
func globalExtAuthValue(path string, k, v *yaml.Node, m map[string]any, out *[]setting) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, path, err)
	}
	if _, err := parseGlobalAuth(string(b)); err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, path, err)
	}
	*out = append(*out, setting{flag: "global-ext-auth", value: string(b), key: path, line: k.Line})
	return nil
}
