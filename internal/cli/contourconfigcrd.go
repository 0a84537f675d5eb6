package cli

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// A --config file may also be a ContourConfiguration object (projectcontour.io/v1alpha1,
// Contour v1.33), as `kubectl get contourconfiguration NAME -o yaml` prints it: its spec
// carries the same settings as Contour's configuration file under other names (camel
// case, grouped under envoy, httpproxy, ...), each mapped to the same Portico flag.

// contourConfigurationKeys are the top-level keys of a ContourConfiguration object.
var contourConfigurationKeys = section{
	"apiVersion": only([]string{"projectcontour.io/v1alpha1"}, "the file is read as a ContourConfiguration because of its kind"),
	"kind":       only([]string{"ContourConfiguration"}, "the file is read as a ContourConfiguration because of its kind"),
	// Where the object lives says nothing about the settings.
	"metadata": ruleFunc(func(string, *yaml.Node, *yaml.Node, *[]setting) error { return nil }),
	"status":   ruleFunc(func(string, *yaml.Node, *yaml.Node, *[]setting) error { return nil }),
	"spec":     contourConfigurationSpec,
}

var (
	xdsAddress    = &pairSpec{flag: "xds-addr", defaults: [2]string{"0.0.0.0", "8001"}, join: net.JoinHostPort, split: splitHostPort}
	debugAddress  = &pairSpec{flag: "pprof-addr", defaults: [2]string{"127.0.0.1", "6060"}, join: net.JoinHostPort, split: splitHostPort}
	httpAddress   = &pairSpec{flag: "http-addr", defaults: [2]string{"0.0.0.0", "8080"}, join: net.JoinHostPort, split: splitHostPort}
	httpsAddress  = &pairSpec{flag: "https-addr", defaults: [2]string{"0.0.0.0", "8443"}, join: net.JoinHostPort, split: splitHostPort}
	envoyServiceR = &pairSpec{flag: "envoy-service", defaults: [2]string{"projectcontour", "envoy"}, join: joinSlash, split: splitSlash}
)

var contourConfigurationSpec = section{
	"xdsServer": section{
		"address": pair(xdsAddress, 0, str),
		"port":    pair(xdsAddress, 1, port),
		"tls": section{
			"caFile":   asFlag("xds-tls-ca-file", str),
			"certFile": asFlag("xds-tls-cert-file", str),
			"keyFile":  asFlag("xds-tls-key-file", str),
			"insecure": asFlag("xds-insecure", boolean),
		},
	},
	"ingress": contourKeys["ingress"],
	"debug": section{
		"address": pair(debugAddress, 0, str),
		"port":    pair(debugAddress, 1, port),
	},
	"health": refuse("Portico serves /healthz and /readyz on --admin-addr: set admin-addr instead"),
	"envoy": section{
		"listener": section{
			"useProxyProtocol":                  asFlag("use-proxy-protocol", boolean),
			"disableAllowChunkedLength":         contourKeys["disableAllowChunkedLength"],
			"disableMergeSlashes":               contourKeys["disableMergeSlashes"],
			"serverHeaderTransformation":        contourKeys["serverHeaderTransformation"],
			"compression":                       contourKeys["compression"],
			"connectionBalancer":                refuse("not supported yet: Envoy's default connection balancing applies"),
			"maxRequestsPerConnection":          refuse("not supported yet: a client connection serves requests without a limit"),
			"per-connection-buffer-limit-bytes": refuse("not supported yet: Envoy's default buffer limit (1 MiB) applies"),
			"tls": section{
				"minimumProtocolVersion": asFlag("tls-minimum-protocol-version", tlsVersion),
				"maximumProtocolVersion": asFlag("tls-maximum-protocol-version", tlsVersion),
				"cipherSuites":           contourKeys["tls"].(section)["cipher-suites"],
			},
			"socketOptions":             refuse("socket options (TOS, traffic class) are not supported yet"),
			"maxRequestsPerIOCycle":     refuse("not supported yet"),
			"httpMaxConcurrentStreams":  refuse("not supported yet: HTTP/2 clients get Envoy's and Go's default stream limits"),
			"maxConnectionsPerListener": refuse("not supported yet: listeners take connections without a limit"),
		},
		"service": section{
			"namespace": pair(envoyServiceR, 0, dnsLabel),
			"name":      pair(envoyServiceR, 1, dnsLabel),
		},
		"http":              envoyListener(httpAddress),
		"https":             envoyListener(httpsAddress),
		"health":            refuse("Envoy's health listener is not supported yet: probe Envoy's admin /ready (portico bootstrap)"),
		"metrics":           refuse("Envoy's metrics are on its admin interface (portico bootstrap --stats-address)"),
		"clientCertificate": contourKeys["tls"].(section)["envoy-client-certificate"],
		"logging": section{
			"accessLogFormat":       contourKeys["accesslog-format"],
			"accessLogFormatString": contourKeys["accesslog-format-string"],
			"accessLogJSONFields":   contourKeys["json-fields"],
			"accessLogLevel":        contourKeys["accesslog-level"],
		},
		"defaultHTTPVersions": contourKeys["default-http-versions"],
		"timeouts": section{
			"requestTimeout":                contourKeys["timeouts"].(section)["request-timeout"],
			"connectionIdleTimeout":         contourKeys["timeouts"].(section)["connection-idle-timeout"],
			"streamIdleTimeout":             contourKeys["timeouts"].(section)["stream-idle-timeout"],
			"maxConnectionDuration":         contourKeys["timeouts"].(section)["max-connection-duration"],
			"delayedCloseTimeout":           contourKeys["timeouts"].(section)["delayed-close-timeout"],
			"connectionShutdownGracePeriod": contourKeys["timeouts"].(section)["connection-shutdown-grace-period"],
			"connectTimeout":                contourKeys["timeouts"].(section)["connect-timeout"],
		},
		"cluster": section{
			"dnsLookupFamily":                   contourKeys["cluster"].(section)["dns-lookup-family"],
			"maxRequestsPerConnection":          contourKeys["cluster"].(section)["max-requests-per-connection"],
			"per-connection-buffer-limit-bytes": contourKeys["cluster"].(section)["per-connection-buffer-limit-bytes"],
			"circuitBreakers": section{
				"maxConnections":        asFlag("default-max-connections", wholeNumber),
				"maxPendingRequests":    asFlag("default-max-pending-requests", wholeNumber),
				"maxRequests":           asFlag("default-max-requests", wholeNumber),
				"maxRetries":            asFlag("default-max-retries", wholeNumber),
				"perHostMaxConnections": asFlag("default-per-host-max-connections", wholeNumber),
			},
			"upstreamTLS": section{
				"minimumProtocolVersion": asFlag("upstream-tls-minimum-protocol-version", tlsVersion),
				"maximumProtocolVersion": asFlag("upstream-tls-maximum-protocol-version", tlsVersion),
				"cipherSuites":           contourKeys["cluster"].(section)["upstream-tls"].(section)["cipher-suites"],
			},
		},
		"network": section{
			"numTrustedHops":       contourKeys["network"].(section)["num-trusted-hops"],
			"adminPort":            contourKeys["network"].(section)["admin-port"],
			"stripTrailingHostDot": contourKeys["network"].(section)["strip-trailing-host-dot"],
		},
		"omEnforcedHealth": contourKeys["omEnforcedHealthListener"],
	},
	"gateway": contourKeys["gateway"],
	"httpproxy": section{
		"disablePermitInsecure": contourKeys["disablePermitInsecure"],
		"rootNamespaces":        asFlag("root-namespaces", namespaceList),
		"fallbackCertificate":   contourKeys["tls"].(section)["fallback-certificate"],
	},
	"enableExternalNameService": contourKeys["enableExternalNameService"],
	"globalExtAuth":             ruleFunc(globalExtAuthSpec),
	"rateLimitService": section{
		"extensionService":             asFlag("rate-limit-extension-service", namespacedName),
		"domain":                       contourKeys["rateLimitService"].(section)["domain"],
		"failOpen":                     contourKeys["rateLimitService"].(section)["failOpen"],
		"enableXRateLimitHeaders":      contourKeys["rateLimitService"].(section)["enableXRateLimitHeaders"],
		"enableResourceExhaustedCode":  contourKeys["rateLimitService"].(section)["enableResourceExhaustedCode"],
		"defaultGlobalRateLimitPolicy": contourKeys["rateLimitService"].(section)["defaultGlobalRateLimitPolicy"],
	},
	"policy": section{
		"requestHeaders":  asFlag("request-headers-policy", asJSON),
		"responseHeaders": asFlag("response-headers-policy", asJSON),
		"applyToIngress":  applyToIngress,
	},
	"metrics":      contourKeys["metrics"],
	"tracing":      contourKeys["tracing"],
	"featureFlags": contourKeys["featureFlags"],
}

// envoyListener is the rule of envoy.http or envoy.https: Envoy's listener address.
func envoyListener(addr *pairSpec) section {
	return section{
		"address":   pair(addr, 0, str),
		"port":      pair(addr, 1, port),
		"accessLog": refuse("an access log file per listener is not supported yet: Envoy logs to its standard output"),
	}
}

// isContourConfiguration reports whether the file's root mapping is a
// ContourConfiguration object (its kind says so).
func isContourConfiguration(root *yaml.Node) bool {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "kind" && root.Content[i+1].Value == "ContourConfiguration" {
			return true
		}
	}
	return false
}

// pairSpec is a flag whose value two keys give in parts (an address and a port, a
// namespace and a name), each part defaulting to Contour's default.
type pairSpec struct {
	flag     string
	defaults [2]string
	join     func(a, b string) string
	split    func(string) (string, string)
}

// pair is the rule of one part of spec's flag: the first key sets the flag with the
// other part's default, the second completes it.
func pair(spec *pairSpec, part int, conv func(*yaml.Node) (string, error)) rule {
	return ruleFunc(func(path string, k, v *yaml.Node, out *[]setting) error {
		val, err := conv(v)
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", v.Line, path, err)
		}
		for i, s := range *out {
			if s.pair == spec {
				a, b := spec.split(s.value)
				parts := [2]string{a, b}
				parts[part] = val
				(*out)[i].value = spec.join(parts[0], parts[1])
				(*out)[i].key += " and " + path
				return nil
			}
		}
		parts := spec.defaults
		parts[part] = val
		*out = append(*out, setting{flag: spec.flag, value: spec.join(parts[0], parts[1]), key: path, line: k.Line, pair: spec})
		return nil
	})
}

func joinSlash(a, b string) string { return a + "/" + b }

func splitSlash(s string) (string, string) {
	a, b, _ := strings.Cut(s, "/")
	return a, b
}

func splitHostPort(s string) (string, string) {
	h, p, _ := net.SplitHostPort(s)
	return h, p
}

func port(v *yaml.Node) (string, error) {
	s, err := scalar(v)
	if err != nil {
		return "", err
	}
	if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q is not a port (1-65535)", s)
	}
	return s, nil
}

// namespaceList is a list of namespace names, comma-separated.
func namespaceList(v *yaml.Node) (string, error) {
	if v.Kind != yaml.SequenceNode {
		return "", fmt.Errorf("a list is expected, got a %s", kindName(v.Kind))
	}
	names := make([]string, len(v.Content))
	for i, e := range v.Content {
		s, err := dnsLabel(e)
		if err != nil {
			return "", err
		}
		names[i] = s
	}
	return strings.Join(names, ","), nil
}
