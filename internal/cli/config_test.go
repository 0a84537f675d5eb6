package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/testutil"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "portico.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigFile(t *testing.T) {
	path := writeConfig(t, `
xds-addr: 0.0.0.0:9001
watch-namespaces: [team-a, team-b]
leader-elect: false
ingress-class-name: from-file
`)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	xds := fs.String("xds-addr", "default", "")
	watch := fs.String("watch-namespaces", "", "")
	leader := fs.Bool("leader-elect", true, "")
	class := fs.String("ingress-class-name", "portico", "")
	if err := fs.Parse([]string{"--ingress-class-name", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyConfigFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if *xds != "0.0.0.0:9001" || *watch != "team-a,team-b" || *leader || *class != "from-flag" {
		t.Errorf("got xds=%q watch=%q leader=%v class=%q; the file must fill unset flags and the command line win", *xds, *watch, *leader, *class)
	}
	path = writeConfig(t, "leader-elect: false\nxds-adr: x\n")
	if _, err := applyConfigFile(fs, path); err == nil || !strings.Contains(err.Error(), `line 2: unknown setting "xds-adr"`) {
		t.Errorf("a misspelt setting: err = %v, want its name and line", err)
	}
}

// Both forms in one file: Contour's keys and flag names mix, the command line wins over
// both, and a flag set twice (once per form) is an error naming both lines.
func TestConfigFileMixedForms(t *testing.T) {
	fs := flag.NewFlagSet("portico serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	hops := fs.String("num-trusted-hops", "0", "")
	idle := fs.String("stream-idle-timeout", "", "")
	xds := fs.String("xds-addr", "", "")
	if err := fs.Parse([]string{"--stream-idle-timeout", "9s"}); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, "xds-addr: 0.0.0.0:8001\nnetwork:\n  num-trusted-hops: 2\ntimeouts:\n  stream-idle-timeout: 1m\n")
	if _, err := applyConfigFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if *hops != "2" || *idle != "9s" || *xds != "0.0.0.0:8001" {
		t.Errorf("hops=%q idle=%q xds=%q", *hops, *idle, *xds)
	}
	path = writeConfig(t, "num-trusted-hops: 1\nnetwork:\n  num-trusted-hops: 2\n")
	_, err := applyConfigFile(fs, path)
	if err == nil || !strings.Contains(err.Error(), "line 3: network.num-trusted-hops sets --num-trusted-hops, which num-trusted-hops (line 1) sets too") {
		t.Errorf("one flag twice: err = %v", err)
	}
	fs.String("envoy-service", "", "")
	path = writeConfig(t, "envoy-service: a/b\nenvoy-service-name: c\n")
	if _, err := applyConfigFile(fs, path); err == nil || !strings.Contains(err.Error(), "line 2: envoy-service-name sets --envoy-service, which envoy-service (line 1) sets too") {
		t.Errorf("envoy-service and envoy-service-name: err = %v", err)
	}
	path = writeConfig(t, "kubeconfig: /k\n")
	if _, err := applyConfigFile(fs, path); err == nil || !strings.Contains(err.Error(), "line 1: kubeconfig sets --kubeconfig, which portico serve does not have") {
		t.Errorf("a setting of another command: err = %v", err)
	}
	for text, want := range map[string]string{
		"- a\n- b\n":                     "line 1: the file must be a mapping",
		"timeouts: 5s\n":                 "line 1: timeouts: a mapping is expected, got a value",
		"timeouts:\n  stream-idle: 5s\n": "line 2: unknown setting timeouts.stream-idle (the keys of timeouts are connect-timeout, connection-idle-timeout",
		"config: other.yaml\n":           "", // config is not a flag of this flag set: unknown
	} {
		_, err := applyConfigFile(fs, writeConfig(t, text))
		if err == nil || (want != "" && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: err = %v, want %q", text, err, want)
		}
	}
}

// contourCases holds, for every key of Contour's configuration file, a file that sets
// it and the flags that file means in Portico, or the refusal it gets.
var contourCases = []struct {
	key, yaml string
	want      map[string]string // flag -> value
	err       string
}{
	{"debug", "debug: true", map[string]string{"log-level": "debug"}, ""},
	{"debug", "debug: false", nil, ""},
	{"debug", "debug: yes please", nil, `debug: "yes please" is not true or false`},
	{"incluster", "incluster: true", map[string]string{"kubeconfig": ""}, ""},
	{"incluster", "incluster: false", nil, ""},
	{"kubeconfig", "kubeconfig: /etc/kube.conf", map[string]string{"kubeconfig": "/etc/kube.conf"}, ""},
	{"kubernetesClientQPS", "kubernetesClientQPS: 50.5", map[string]string{"kube-api-qps": "50.5"}, ""},
	{"kubernetesClientQPS", "kubernetesClientQPS: -1", nil, "not a positive number"},
	{"kubernetesClientBurst", "kubernetesClientBurst: 100", map[string]string{"kube-api-burst": "100"}, ""},
	{"server.xds-server-type", "server: {xds-server-type: envoy}", nil, ""},
	{"server.xds-server-type", "server: {xds-server-type: contour}", nil, ""},
	{"server.xds-server-type", "server: {xds-server-type: grpc}", nil, `server.xds-server-type: "grpc" is not supported (only envoy, contour)`},
	{"gateway", "gateway: {gatewayRef: {namespace: a, name: b}}", nil, "gateway: Portico serves every Gateway whose GatewayClass"},
	{"ingress-status-address", "ingress-status-address: lb.example.com", map[string]string{"ingress-status-address": "lb.example.com"}, ""},
	{"accesslog-format", "accesslog-format: envoy", nil, ""},
	{"accesslog-format", "accesslog-format: json", nil, `accesslog-format: "json" is not supported (only envoy)`},
	{"accesslog-format-string", "accesslog-format-string: '%START_TIME%'", nil, "custom access log formats are not supported yet"},
	{"json-fields", "json-fields: [method]", nil, "JSON access logs are not supported yet"},
	{"accesslog-level", "accesslog-level: info", nil, ""},
	{"accesslog-level", "accesslog-level: error", nil, `accesslog-level: "error" is not supported (only info)`},
	{"tls.minimum-protocol-version", "tls: {minimum-protocol-version: '1.3'}", map[string]string{"tls-minimum-protocol-version": "1.3"}, ""},
	{"tls.minimum-protocol-version", "tls: {minimum-protocol-version: '1.1'}", nil, `tls.minimum-protocol-version: unknown TLS version "1.1": use 1.2 or 1.3`},
	{"tls.maximum-protocol-version", "tls: {maximum-protocol-version: '1.2'}", map[string]string{"tls-maximum-protocol-version": "1.2"}, ""},
	{"tls.cipher-suites", "tls: {cipher-suites: [ECDHE-RSA-AES256-GCM-SHA384, '[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]']}", map[string]string{"tls-cipher-suites": "ECDHE-RSA-AES256-GCM-SHA384,[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]"}, ""},
	{"tls.cipher-suites", "tls: {cipher-suites: [ECDHE-RSA-AES256-GCM-SHA384, RC4-SHA]}", nil, `tls.cipher-suites: unknown cipher suite "RC4-SHA"`},
	{"tls.cipher-suites", "tls: {cipher-suites: ECDHE-RSA-AES256-GCM-SHA384}", nil, "tls.cipher-suites: a list is expected"},
	{"tls.fallback-certificate", "tls: {fallback-certificate: {namespace: infra, name: fallback}}", map[string]string{"fallback-certificate": "infra/fallback"}, ""},
	{"tls.fallback-certificate", "tls: {fallback-certificate: {name: fallback}}", nil, "tls.fallback-certificate: both namespace and name are needed"},
	{"tls.fallback-certificate", "tls: {fallback-certificate: {namespace: Infra_1, name: x}}", nil, `tls.fallback-certificate: namespace: "Infra_1": a lowercase RFC 1123 label`},
	{"tls.envoy-client-certificate", "tls: {envoy-client-certificate: {namespace: infra, name: envoy-client}}", map[string]string{"envoy-client-certificate": "infra/envoy-client"}, ""},
	{"tls.envoy-client-certificate", "tls: {envoy-client-certificate: {namespace: infra}}", nil, "tls.envoy-client-certificate: both namespace and name are needed"},
	{"disablePermitInsecure", "disablePermitInsecure: true", map[string]string{"disable-permit-insecure": "true"}, ""},
	{"disableAllowChunkedLength", "disableAllowChunkedLength: true", nil, "disableAllowChunkedLength: not supported yet"},
	{"disableMergeSlashes", "disableMergeSlashes: true", map[string]string{"disable-merge-slashes": "true"}, ""},
	{"disableMergeSlashes", "disableMergeSlashes: 'true'", nil, `disableMergeSlashes: "true" is not true or false`},
	{"compression.algorithm", "compression: {algorithm: disabled}", map[string]string{"compression": "disabled"}, ""},
	{"compression.algorithm", "compression: {algorithm: gzip}", map[string]string{"compression": "gzip"}, ""},
	{"compression.algorithm", "compression: {algorithm: zstd}", map[string]string{"compression": "zstd"}, ""},
	{"compression.algorithm", "compression: {algorithm: deflate}", nil, `compression.algorithm: compression "deflate": use gzip, brotli, zstd or disabled`},
	{"serverHeaderTransformation", "serverHeaderTransformation: pass_through", map[string]string{"server-header-transformation": "pass_through"}, ""},
	{"serverHeaderTransformation", "serverHeaderTransformation: append_if_absent", map[string]string{"server-header-transformation": "append_if_absent"}, ""},
	{"serverHeaderTransformation", "serverHeaderTransformation: replace", nil, `server header transformation "replace": use overwrite, append_if_absent or pass_through`},
	{"enableExternalNameService", "enableExternalNameService: true", map[string]string{"enable-external-name-services": "true"}, ""},
	{"timeouts.request-timeout", "timeouts: {request-timeout: 30s}", map[string]string{"request-timeout": "30s"}, ""},
	{"timeouts.request-timeout", "timeouts: {request-timeout: infinity}", map[string]string{"request-timeout": "0s"}, ""},
	{"timeouts.connection-idle-timeout", "timeouts: {connection-idle-timeout: 90s}", map[string]string{"connection-idle-timeout": "1m30s"}, ""},
	{"timeouts.connection-idle-timeout", "timeouts: {connection-idle-timeout: infinite}", map[string]string{"connection-idle-timeout": "0s"}, ""},
	{"timeouts.connection-idle-timeout", "timeouts: {connection-idle-timeout: 0s}", nil, ""}, // Contour: 0s keeps the default
	{"timeouts.connection-idle-timeout", "timeouts: {connection-idle-timeout: -1s}", nil, `"-1s" is negative`},
	{"timeouts.stream-idle-timeout", "timeouts: {stream-idle-timeout: 5m}", map[string]string{"stream-idle-timeout": "5m0s"}, ""},
	{"timeouts.stream-idle-timeout", "timeouts: {stream-idle-timeout: infinity}", map[string]string{"stream-idle-timeout": "0s"}, ""},
	{"timeouts.stream-idle-timeout", "timeouts: {stream-idle-timeout: 5 minutes}", nil, `timeouts.stream-idle-timeout: "5 minutes" is not a duration`},
	{"timeouts.stream-idle-timeout", "timeouts: {stream-idle-timeout: 0s}", nil, ""},
	{"timeouts.max-connection-duration", "timeouts: {max-connection-duration: 1h}", map[string]string{"max-connection-duration": "1h0m0s"}, ""},
	{"timeouts.max-connection-duration", "timeouts: {max-connection-duration: infinity}", map[string]string{"max-connection-duration": "0s"}, ""},
	{"timeouts.delayed-close-timeout", "timeouts: {delayed-close-timeout: 2s}", map[string]string{"delayed-close-timeout": "2s"}, ""},
	{"timeouts.delayed-close-timeout", "timeouts: {delayed-close-timeout: soon}", nil, `"soon" is not a duration`},
	{"timeouts.connection-shutdown-grace-period", "timeouts: {connection-shutdown-grace-period: 10s}", map[string]string{"connection-shutdown-grace-period": "10s"}, ""},
	{"timeouts.connect-timeout", "timeouts: {connect-timeout: 500ms}", map[string]string{"connect-timeout": "500ms"}, ""},
	{"timeouts.connect-timeout", "timeouts: {connect-timeout: infinity}", nil, `"infinity" is not a duration above 0`},
	{"policy.request-headers", "policy: {request-headers: {set: {X-Env: prod}, remove: [X-Debug]}}", map[string]string{"request-headers-policy": `{"remove":["X-Debug"],"set":{"X-Env":"prod"}}`}, ""},
	{"policy.request-headers", "policy: {request-headers: [X-Env]}", nil, "policy.request-headers: a mapping is expected, got a list"},
	{"policy.response-headers", "policy: {response-headers: {set: {X-Served-By: portico}}}", map[string]string{"response-headers-policy": `{"set":{"X-Served-By":"portico"}}`}, ""},
	{"policy.applyToIngress", "policy: {applyToIngress: false}", map[string]string{"headers-policy-ingress": "false"}, ""},
	{"policy.applyToIngress", "policy: {applyToIngress: true}", map[string]string{"headers-policy-ingress": "true"}, ""},
	{"envoy-service-namespace", "envoy-service-namespace: edge", map[string]string{"envoy-service": "edge/envoy"}, ""},
	{"envoy-service-name", "envoy-service-name: proxy", map[string]string{"envoy-service": "projectcontour/proxy"}, ""},
	{"envoy-service-name", "envoy-service-name: proxy\nenvoy-service-namespace: edge", map[string]string{"envoy-service": "edge/proxy"}, ""},
	{"envoy-service-name", "envoy-service-name: Proxy", nil, `envoy-service-name: "Proxy"`},
	{"default-http-versions", "default-http-versions: [HTTP/2]", map[string]string{"default-http-versions": "HTTP/2"}, ""},
	{"default-http-versions", "default-http-versions: [http/1.1, HTTP/2]", map[string]string{"default-http-versions": "http/1.1,HTTP/2"}, ""},
	{"default-http-versions", "default-http-versions: [HTTP/3]", nil, `default-http-versions: unknown HTTP version "HTTP/3": use HTTP/1.1 or HTTP/2`},
	{"cluster.dns-lookup-family", "cluster: {dns-lookup-family: v4}", map[string]string{"dns-lookup-family": "v4"}, ""},
	{"cluster.dns-lookup-family", "cluster: {dns-lookup-family: ipv4}", nil, `cluster.dns-lookup-family: DNS lookup family "ipv4": use auto, v4, v6 or all`},
	{"cluster.max-requests-per-connection", "cluster: {max-requests-per-connection: 1}", nil, "not supported yet"},
	{"cluster.per-connection-buffer-limit-bytes", "cluster: {per-connection-buffer-limit-bytes: 1}", nil, "not supported yet"},
	{"cluster.circuit-breakers.max-connections", "cluster: {circuit-breakers: {max-connections: 100}}", map[string]string{"default-max-connections": "100"}, ""},
	{"cluster.circuit-breakers.max-connections", "cluster: {circuit-breakers: {max-connections: -1}}", nil, `"-1" is not a whole number`},
	{"cluster.circuit-breakers.max-pending-requests", "cluster: {circuit-breakers: {max-pending-requests: 10}}", map[string]string{"default-max-pending-requests": "10"}, ""},
	{"cluster.circuit-breakers.max-requests", "cluster: {circuit-breakers: {max-requests: 200}}", map[string]string{"default-max-requests": "200"}, ""},
	{"cluster.circuit-breakers.max-retries", "cluster: {circuit-breakers: {max-retries: 5}}", map[string]string{"default-max-retries": "5"}, ""},
	{"cluster.circuit-breakers.per-host-max-connections", "cluster: {circuit-breakers: {per-host-max-connections: 4}}", map[string]string{"default-per-host-max-connections": "4"}, ""},
	{"cluster.circuit-breakers", "cluster: {circuit-breakers: {maxConnections: 1}}", nil, "unknown setting cluster.circuit-breakers.maxConnections"},
	{"cluster.upstream-tls.minimum-protocol-version", "cluster: {upstream-tls: {minimum-protocol-version: '1.3'}}", map[string]string{"upstream-tls-minimum-protocol-version": "1.3"}, ""},
	{"cluster.upstream-tls.maximum-protocol-version", "cluster: {upstream-tls: {maximum-protocol-version: '1.3'}}", map[string]string{"upstream-tls-maximum-protocol-version": "1.3"}, ""},
	{"cluster.upstream-tls.maximum-protocol-version", "cluster: {upstream-tls: {maximum-protocol-version: '1.4'}}", nil, `unknown TLS version "1.4"`},
	{"cluster.upstream-tls.cipher-suites", "cluster: {upstream-tls: {cipher-suites: [ECDHE-RSA-AES128-GCM-SHA256, AES256-SHA]}}", map[string]string{"upstream-tls-cipher-suites": "ECDHE-RSA-AES128-GCM-SHA256,AES256-SHA"}, ""},
	{"cluster.upstream-tls.cipher-suites", "cluster: {upstream-tls: {cipher-suites: ['[AES256-SHA|x]']}}", nil, `cluster.upstream-tls.cipher-suites: unknown cipher suite "x"`},
	{"network.num-trusted-hops", "network: {num-trusted-hops: 1}", map[string]string{"num-trusted-hops": "1"}, ""},
	{"network.num-trusted-hops", "network: {num-trusted-hops: -1}", nil, `"-1" is not a whole number`},
	{"network.admin-port", "network: {admin-port: 9001}", nil, "portico bootstrap --admin-address"},
	{"network.strip-trailing-host-dot", "network: {strip-trailing-host-dot: true}", map[string]string{"strip-trailing-host-dot": "true"}, ""},
	{"listener", "listener: {connection-balancer: exact}", nil, "listener tuning"},
	{"rateLimitService.extensionService", "rateLimitService: {extensionService: projectcontour/ratelimit}", map[string]string{"rate-limit-extension-service": "projectcontour/ratelimit"}, ""},
	{"rateLimitService.extensionService", "rateLimitService: {extensionService: ratelimit}", nil, `"ratelimit" is not NAMESPACE/NAME`},
	{"rateLimitService.domain", "rateLimitService: {domain: shop}", map[string]string{"rate-limit-domain": "shop"}, ""},
	{"rateLimitService.failOpen", "rateLimitService: {failOpen: true}", map[string]string{"rate-limit-fail-open": "true"}, ""},
	{"rateLimitService.enableXRateLimitHeaders", "rateLimitService: {enableXRateLimitHeaders: true}", map[string]string{"rate-limit-x-headers": "true"}, ""},
	{"rateLimitService.enableResourceExhaustedCode", "rateLimitService: {enableResourceExhaustedCode: true}", map[string]string{"rate-limit-resource-exhausted": "true"}, ""},
	{"rateLimitService.defaultGlobalRateLimitPolicy", "rateLimitService:\n  defaultGlobalRateLimitPolicy:\n    descriptors: [{entries: [{remoteAddress: {}}]}]",
		map[string]string{"rate-limit-default-global-policy": `{"descriptors":[{"entries":[{"remoteAddress":{}}]}]}`}, ""},
	{"globalExtAuth", "globalExtAuth: {extensionService: a/b}", map[string]string{"global-ext-auth": `{"extensionRef":{"name":"b","namespace":"a"}}`}, ""},
	{"globalExtAuth", "globalExtAuth:\n  extensionService: auth/htpasswd\n  failOpen: true\n  responseTimeout: 1s\n  authPolicy: {context: {header1: value1}}\n  withRequestBody: {maxRequestBytes: 512}",
		map[string]string{"global-ext-auth": `{"authPolicy":{"context":{"header1":"value1"}},"extensionRef":{"name":"htpasswd","namespace":"auth"},"failOpen":true,"responseTimeout":"1s","withRequestBody":{"maxRequestBytes":512}}`}, ""},
	{"globalExtAuth", "globalExtAuth: {failOpen: true}", nil, "globalExtAuth.extensionRef needs the namespace and name"},
	{"globalExtAuth", "globalExtAuth: {extensionService: a/b, responseTimeout: soon}", nil, `globalExtAuth.responseTimeout "soon" is not a duration`},
	{"globalExtAuth", "globalExtAuth: {extensionService: a/b, serviceType: http}", nil, "unknown setting globalExtAuth.serviceType"},
	{"metrics", "metrics: {contour: {port: 8000}}", nil, "set admin-addr instead"},
	{"tracing", "tracing: {extensionService: a/b}", nil, "tracing is not supported yet"},
	{"featureFlags", "featureFlags: []", nil, ""},
	{"featureFlags", "featureFlags: [useEndpointSlices]", nil, "Contour's feature flags have no counterpart"},
	{"omEnforcedHealthListener", "omEnforcedHealthListener: {address: 0.0.0.0, port: 8003}", nil, "not supported yet"},
	{"ingress.classNames", "ingress: {classNames: [contour]}", map[string]string{"ingress-class-name": "contour"}, ""},
	{"ingress.classNames", "ingress: {classNames: [contour, team1]}", map[string]string{"ingress-class-name": "contour,team1"}, ""},
	{"ingress.classNames", "ingress: {classNames: [Team_1]}", nil, `"Team_1": a lowercase RFC 1123 subdomain`},
	{"ingress.statusAddress", "ingress: {statusAddress: 203.0.113.7}", map[string]string{"ingress-status-address": "203.0.113.7"}, ""},
}

func TestContourConfigKeys(t *testing.T) {
	for _, c := range contourCases {
		t.Run(c.key, func(t *testing.T) { checkConfigCase(t, c.yaml+"\n", "line ", c.want, c.err) })
	}
}

// checkConfigCase reads a file of text and holds its settings to want, or its error to
// one that has line and errWant.
func checkConfigCase(t *testing.T, text, line string, want map[string]string, errWant string) {
	t.Helper()
	got, err := readConfigFile(flag.NewFlagSet("t", flag.ContinueOnError), writeConfig(t, text))
	if errWant != "" {
		if err == nil || !strings.Contains(err.Error(), errWant) || !strings.Contains(err.Error(), line) {
			t.Fatalf("%s: err = %v, want one with %q and %q", text, err, line, errWant)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	flags := map[string]string{}
	for _, s := range got {
		flags[s.flag] = s.value
	}
	if len(flags) == 0 {
		flags = nil
	}
	if diff := cmp.Diff(want, flags); diff != "" {
		t.Errorf("%s: flags (-want +got):\n%s", text, diff)
	}
}

// Every key of Contour's file and of a ContourConfiguration's spec has a case above and a
// row in docs/contour-config.md, and
// every row of that table is a key Portico knows.
func TestContourConfigKeysDocumented(t *testing.T) {
	var keys []string
	var walk func(prefix string, r rule)
	walk = func(prefix string, r rule) {
		if s, ok := r.(section); ok {
			for k, sub := range s {
				walk(prefix+"."+k, sub)
			}
			return
		}
		keys = append(keys, prefix)
	}
	for k, r := range contourKeys {
		walk(k, r)
	}
	walk("spec", contourConfigurationSpec)
	sort.Strings(keys)
	tested := map[string]bool{}
	for _, c := range contourCases {
		tested[c.key] = true
	}
	for _, c := range crdCases {
		tested[c.key] = true
	}
	doc, err := os.ReadFile("../../docs/contour-config.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllSubmatch(doc, -1) {
		documented[string(m[1])] = true
	}
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
		if !tested[k] {
			t.Errorf("%s: no case in contourCases", k)
		}
		if !documented[k] {
			t.Errorf("%s: no row in docs/contour-config.md", k)
		}
	}
	for k := range documented {
		if !known[k] {
			t.Errorf("docs/contour-config.md documents %s, which Portico does not know", k)
		}
	}
}

// A change of the file while running is logged as needing a restart, naming the keys
// it touches; an invalid one says the settings in force stay.
func TestWatchConfigFile(t *testing.T) {
	fs := flag.NewFlagSet("portico run", flag.ContinueOnError)
	path := writeConfig(t, "timeouts: {stream-idle-timeout: 1m}\nnetwork: {num-trusted-hops: 1}\n")
	initial, err := readConfigFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchConfigFile(ctx, fs, path, initial, 10*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	defer func() { cancel(); <-done }()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(logs.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log:\n%s", what, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := os.WriteFile(path, []byte("timeouts: {stream-idle-timeout: 2m}\nnetwork: {num-trusted-hops: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(`restart portico to apply it`)
	waitFor(`changed=[timeouts.stream-idle-timeout]`)
	if err := os.WriteFile(path, []byte("timeouts: {stream-idle-timeout: soon}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(`the --config file changed and is invalid`)
}

// crdCases holds, for every key of a ContourConfiguration's spec, an object that sets
// it (spec is a flow mapping on line 3) and what it means in Portico, or its refusal.
var crdCases = []struct {
	key, spec string
	want      map[string]string
	err       string
}{
	{"spec.xdsServer.address", "{xdsServer: {address: 127.0.0.1}}", map[string]string{"xds-addr": "127.0.0.1:8001"}, ""},
	{"spec.xdsServer.port", "{xdsServer: {port: 9001, address: '::1'}}", map[string]string{"xds-addr": "[::1]:9001"}, ""},
	{"spec.xdsServer.port", "{xdsServer: {port: 70000}}", nil, `spec.xdsServer.port: "70000" is not a port`},
	{"spec.xdsServer.tls.caFile", "{xdsServer: {tls: {caFile: /certs/ca.crt}}}", map[string]string{"xds-tls-ca-file": "/certs/ca.crt"}, ""},
	{"spec.xdsServer.tls.certFile", "{xdsServer: {tls: {certFile: /certs/tls.crt}}}", map[string]string{"xds-tls-cert-file": "/certs/tls.crt"}, ""},
	{"spec.xdsServer.tls.keyFile", "{xdsServer: {tls: {keyFile: /certs/tls.key}}}", map[string]string{"xds-tls-key-file": "/certs/tls.key"}, ""},
	{"spec.xdsServer.tls.insecure", "{xdsServer: {tls: {insecure: true}}}", map[string]string{"xds-insecure": "true"}, ""},
	{"spec.ingress.classNames", "{ingress: {classNames: [contour]}}", map[string]string{"ingress-class-name": "contour"}, ""},
	{"spec.ingress.statusAddress", "{ingress: {statusAddress: lb.example.com}}", map[string]string{"ingress-status-address": "lb.example.com"}, ""},
	{"spec.debug.address", "{debug: {address: 127.0.0.1}}", map[string]string{"pprof-addr": "127.0.0.1:6060"}, ""},
	{"spec.debug.port", "{debug: {port: 6061}}", map[string]string{"pprof-addr": "127.0.0.1:6061"}, ""},
	{"spec.health", "{health: {port: 8000}}", nil, "spec.health: Portico serves /healthz and /readyz on --admin-addr"},
	{"spec.envoy.listener.useProxyProtocol", "{envoy: {listener: {useProxyProtocol: true}}}", map[string]string{"use-proxy-protocol": "true"}, ""},
	{"spec.envoy.listener.disableAllowChunkedLength", "{envoy: {listener: {disableAllowChunkedLength: true}}}", nil, "not supported yet"},
	{"spec.envoy.listener.disableMergeSlashes", "{envoy: {listener: {disableMergeSlashes: true}}}", map[string]string{"disable-merge-slashes": "true"}, ""},
	{"spec.envoy.listener.serverHeaderTransformation", "{envoy: {listener: {serverHeaderTransformation: append_if_absent}}}", map[string]string{"server-header-transformation": "append_if_absent"}, ""},
	{"spec.envoy.listener.compression.algorithm", "{envoy: {listener: {compression: {algorithm: brotli}}}}", map[string]string{"compression": "brotli"}, ""},
	{"spec.envoy.listener.connectionBalancer", "{envoy: {listener: {connectionBalancer: exact}}}", nil, "not supported yet"},
	{"spec.envoy.listener.maxRequestsPerConnection", "{envoy: {listener: {maxRequestsPerConnection: 100}}}", nil, "not supported yet"},
	{"spec.envoy.listener.per-connection-buffer-limit-bytes", "{envoy: {listener: {per-connection-buffer-limit-bytes: 32768}}}", nil, "not supported yet"},
	{"spec.envoy.listener.tls.minimumProtocolVersion", "{envoy: {listener: {tls: {minimumProtocolVersion: '1.3'}}}}", map[string]string{"tls-minimum-protocol-version": "1.3"}, ""},
	{"spec.envoy.listener.tls.maximumProtocolVersion", "{envoy: {listener: {tls: {maximumProtocolVersion: '1.2'}}}}", map[string]string{"tls-maximum-protocol-version": "1.2"}, ""},
	{"spec.envoy.listener.tls.cipherSuites", "{envoy: {listener: {tls: {cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256]}}}}", map[string]string{"tls-cipher-suites": "ECDHE-RSA-AES128-GCM-SHA256"}, ""},
	{"spec.envoy.listener.socketOptions", "{envoy: {listener: {socketOptions: {tos: 64}}}}", nil, "socket options (TOS, traffic class) are not supported yet"},
	{"spec.envoy.listener.maxRequestsPerIOCycle", "{envoy: {listener: {maxRequestsPerIOCycle: 10}}}", nil, "not supported yet"},
	{"spec.envoy.listener.httpMaxConcurrentStreams", "{envoy: {listener: {httpMaxConcurrentStreams: 100}}}", nil, "not supported yet"},
	{"spec.envoy.listener.maxConnectionsPerListener", "{envoy: {listener: {maxConnectionsPerListener: 1000}}}", nil, "not supported yet"},
	{"spec.envoy.service.namespace", "{envoy: {service: {namespace: edge}}}", map[string]string{"envoy-service": "edge/envoy"}, ""},
	{"spec.envoy.service.name", "{envoy: {service: {name: proxy, namespace: edge}}}", map[string]string{"envoy-service": "edge/proxy"}, ""},
	{"spec.envoy.http.address", "{envoy: {http: {address: 0.0.0.0}}}", map[string]string{"http-addr": "0.0.0.0:8080"}, ""},
	{"spec.envoy.http.port", "{envoy: {http: {port: 80}}}", map[string]string{"http-addr": "0.0.0.0:80"}, ""},
	{"spec.envoy.http.accessLog", "{envoy: {http: {accessLog: /dev/stdout}}}", nil, "an access log file per listener is not supported yet"},
	{"spec.envoy.https.address", "{envoy: {https: {address: 0.0.0.0}}}", map[string]string{"https-addr": "0.0.0.0:8443"}, ""},
	{"spec.envoy.https.port", "{envoy: {https: {port: 443}}}", map[string]string{"https-addr": "0.0.0.0:443"}, ""},
	{"spec.envoy.https.accessLog", "{envoy: {https: {accessLog: /dev/stdout}}}", nil, "an access log file per listener is not supported yet"},
	{"spec.envoy.health", "{envoy: {health: {port: 8002}}}", nil, "Envoy's health listener is not supported yet"},
	{"spec.envoy.metrics", "{envoy: {metrics: {port: 8002}}}", nil, "portico bootstrap --stats-address"},
	{"spec.envoy.clientCertificate", "{envoy: {clientCertificate: {name: c, namespace: n}}}", map[string]string{"envoy-client-certificate": "n/c"}, ""},
	{"spec.envoy.logging.accessLogFormat", "{envoy: {logging: {accessLogFormat: envoy}}}", nil, ""},
	{"spec.envoy.logging.accessLogFormatString", "{envoy: {logging: {accessLogFormatString: x}}}", nil, "custom access log formats are not supported yet"},
	{"spec.envoy.logging.accessLogJSONFields", "{envoy: {logging: {accessLogJSONFields: [method]}}}", nil, "JSON access logs are not supported yet"},
	{"spec.envoy.logging.accessLogLevel", "{envoy: {logging: {accessLogLevel: critical}}}", nil, `"critical" is not supported (only info)`},
	{"spec.envoy.defaultHTTPVersions", "{envoy: {defaultHTTPVersions: [HTTP/1.1]}}", map[string]string{"default-http-versions": "HTTP/1.1"}, ""},
	{"spec.envoy.timeouts.requestTimeout", "{envoy: {timeouts: {requestTimeout: 30s}}}", map[string]string{"request-timeout": "30s"}, ""},
	{"spec.envoy.timeouts.connectionIdleTimeout", "{envoy: {timeouts: {connectionIdleTimeout: 2m}}}", map[string]string{"connection-idle-timeout": "2m0s"}, ""},
	{"spec.envoy.timeouts.streamIdleTimeout", "{envoy: {timeouts: {streamIdleTimeout: 5m}}}", map[string]string{"stream-idle-timeout": "5m0s"}, ""},
	{"spec.envoy.timeouts.maxConnectionDuration", "{envoy: {timeouts: {maxConnectionDuration: 1h}}}", map[string]string{"max-connection-duration": "1h0m0s"}, ""},
	{"spec.envoy.timeouts.delayedCloseTimeout", "{envoy: {timeouts: {delayedCloseTimeout: infinity}}}", map[string]string{"delayed-close-timeout": "0s"}, ""},
	{"spec.envoy.timeouts.connectionShutdownGracePeriod", "{envoy: {timeouts: {connectionShutdownGracePeriod: 5s}}}", map[string]string{"connection-shutdown-grace-period": "5s"}, ""},
	{"spec.envoy.timeouts.connectTimeout", "{envoy: {timeouts: {connectTimeout: 3s}}}", map[string]string{"connect-timeout": "3s"}, ""},
	{"spec.envoy.cluster.dnsLookupFamily", "{envoy: {cluster: {dnsLookupFamily: v6}}}", map[string]string{"dns-lookup-family": "v6"}, ""},
	{"spec.envoy.cluster.maxRequestsPerConnection", "{envoy: {cluster: {maxRequestsPerConnection: 1}}}", nil, "not supported yet"},
	{"spec.envoy.cluster.per-connection-buffer-limit-bytes", "{envoy: {cluster: {per-connection-buffer-limit-bytes: 1}}}", nil, "not supported yet"},
	{"spec.envoy.cluster.circuitBreakers.maxConnections", "{envoy: {cluster: {circuitBreakers: {maxConnections: 100}}}}", map[string]string{"default-max-connections": "100"}, ""},
	{"spec.envoy.cluster.circuitBreakers.maxPendingRequests", "{envoy: {cluster: {circuitBreakers: {maxPendingRequests: 10}}}}", map[string]string{"default-max-pending-requests": "10"}, ""},
	{"spec.envoy.cluster.circuitBreakers.maxRequests", "{envoy: {cluster: {circuitBreakers: {maxRequests: 200}}}}", map[string]string{"default-max-requests": "200"}, ""},
	{"spec.envoy.cluster.circuitBreakers.maxRetries", "{envoy: {cluster: {circuitBreakers: {maxRetries: 5}}}}", map[string]string{"default-max-retries": "5"}, ""},
	{"spec.envoy.cluster.circuitBreakers.perHostMaxConnections", "{envoy: {cluster: {circuitBreakers: {perHostMaxConnections: 4}}}}", map[string]string{"default-per-host-max-connections": "4"}, ""},
	{"spec.envoy.cluster.upstreamTLS.minimumProtocolVersion", "{envoy: {cluster: {upstreamTLS: {minimumProtocolVersion: '1.3'}}}}", map[string]string{"upstream-tls-minimum-protocol-version": "1.3"}, ""},
	{"spec.envoy.cluster.upstreamTLS.maximumProtocolVersion", "{envoy: {cluster: {upstreamTLS: {maximumProtocolVersion: '1.3'}}}}", map[string]string{"upstream-tls-maximum-protocol-version": "1.3"}, ""},
	{"spec.envoy.cluster.upstreamTLS.cipherSuites", "{envoy: {cluster: {upstreamTLS: {cipherSuites: [AES128-SHA]}}}}", map[string]string{"upstream-tls-cipher-suites": "AES128-SHA"}, ""},
	{"spec.envoy.cluster.upstreamTLS.cipherSuites", "{envoy: {cluster: {upstreamTLS: {cipherSuites: [x]}}}}", nil, `unknown cipher suite "x"`},
	{"spec.envoy.network.numTrustedHops", "{envoy: {network: {numTrustedHops: 2}}}", map[string]string{"num-trusted-hops": "2"}, ""},
	{"spec.envoy.network.adminPort", "{envoy: {network: {adminPort: 9001}}}", nil, "portico bootstrap --admin-address"},
	{"spec.envoy.network.stripTrailingHostDot", "{envoy: {network: {stripTrailingHostDot: true}}}", map[string]string{"strip-trailing-host-dot": "true"}, ""},
	{"spec.envoy.omEnforcedHealth", "{envoy: {omEnforcedHealth: {port: 8003}}}", nil, "not supported yet"},
	{"spec.gateway", "{gateway: {gatewayRef: {name: a, namespace: b}}}", nil, "Portico serves every Gateway"},
	{"spec.httpproxy.disablePermitInsecure", "{httpproxy: {disablePermitInsecure: true}}", map[string]string{"disable-permit-insecure": "true"}, ""},
	{"spec.httpproxy.rootNamespaces", "{httpproxy: {rootNamespaces: [infra, edge]}}", map[string]string{"root-namespaces": "infra,edge"}, ""},
	{"spec.httpproxy.rootNamespaces", "{httpproxy: {rootNamespaces: [Infra]}}", nil, `spec.httpproxy.rootNamespaces: "Infra"`},
	{"spec.httpproxy.fallbackCertificate", "{httpproxy: {fallbackCertificate: {name: fb, namespace: infra}}}", map[string]string{"fallback-certificate": "infra/fb"}, ""},
	{"spec.enableExternalNameService", "{enableExternalNameService: true}", map[string]string{"enable-external-name-services": "true"}, ""},
	{"spec.globalExtAuth", "{globalExtAuth: {extensionRef: {name: a, namespace: b}, authPolicy: {disabled: true}}}", map[string]string{"global-ext-auth": `{"authPolicy":{"disabled":true},"extensionRef":{"name":"a","namespace":"b"}}`}, ""},
	{"spec.globalExtAuth", "{globalExtAuth: {extensionService: {name: a, namespace: b}}}", nil, `unknown field "extensionService"`},
	{"spec.globalExtAuth", "{globalExtAuth: {extensionRef: {name: a, namespace: b}, serviceType: ftp}}", nil, `serviceType "ftp" is not a protocol`},
	{"spec.rateLimitService.extensionService", "{rateLimitService: {extensionService: {name: rl, namespace: infra}}}", map[string]string{"rate-limit-extension-service": "infra/rl"}, ""},
	{"spec.rateLimitService.domain", "{rateLimitService: {domain: shop}}", map[string]string{"rate-limit-domain": "shop"}, ""},
	{"spec.rateLimitService.failOpen", "{rateLimitService: {failOpen: true}}", map[string]string{"rate-limit-fail-open": "true"}, ""},
	{"spec.rateLimitService.enableXRateLimitHeaders", "{rateLimitService: {enableXRateLimitHeaders: true}}", map[string]string{"rate-limit-x-headers": "true"}, ""},
	{"spec.rateLimitService.enableResourceExhaustedCode", "{rateLimitService: {enableResourceExhaustedCode: true}}", map[string]string{"rate-limit-resource-exhausted": "true"}, ""},
	{"spec.rateLimitService.defaultGlobalRateLimitPolicy", "{rateLimitService: {defaultGlobalRateLimitPolicy: {disabled: true}}}", map[string]string{"rate-limit-default-global-policy": `{"disabled":true}`}, ""},
	{"spec.policy.requestHeaders", "{policy: {requestHeaders: {set: {X-Env: prod}}}}", map[string]string{"request-headers-policy": `{"set":{"X-Env":"prod"}}`}, ""},
	{"spec.policy.responseHeaders", "{policy: {responseHeaders: {remove: [X-Powered-By]}}}", map[string]string{"response-headers-policy": `{"remove":["X-Powered-By"]}`}, ""},
	{"spec.policy.applyToIngress", "{policy: {applyToIngress: true}}", map[string]string{"headers-policy-ingress": "true"}, ""},
	{"spec.metrics", "{metrics: {port: 8000}}", nil, "set admin-addr instead"},
	{"spec.tracing", "{tracing: {serviceName: x}}", nil, "tracing is not supported yet"},
	{"spec.featureFlags", "{featureFlags: [a]}", nil, "Contour's feature flags have no counterpart"},
}

func TestContourConfigurationKeys(t *testing.T) {
	for _, c := range crdCases {
		t.Run(c.key, func(t *testing.T) {
			checkConfigCase(t, "apiVersion: projectcontour.io/v1alpha1\nkind: ContourConfiguration\nspec: "+c.spec+"\nmetadata: {name: contour, namespace: projectcontour}\n", "line 3: ", c.want, c.err)
		})
	}
	empty := flag.NewFlagSet("t", flag.ContinueOnError)
	for text, want := range map[string]string{
		"kind: ContourConfiguration\napiVersion: projectcontour.io/v1\n":                     `line 2: apiVersion: "projectcontour.io/v1" is not supported`,
		"kind: ContourConfiguration\nspec: {envoy: {timeout: {}}}\n":                         "line 2: unknown setting spec.envoy.timeout (the keys of spec.envoy are ",
		"kind: ContourConfiguration\nxds-addr: 0.0.0.0:8001\n":                               `line 2: unknown setting xds-addr (the keys of the file are apiVersion, kind, metadata, spec, status)`,
		"kind: ContourConfiguration\nspec: {xdsServer: {port: 1}, debug: {address: a::1}}\n": "",
	} {
		_, err := readConfigFile(empty, writeConfig(t, text))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: err = %v, want %q", text, err, want)
		}
	}
}

// --request-headers-policy and --response-headers-policy take Contour's form of a
// headers policy and refuse what an HTTPProxy service's policy could not do.
func TestHeadersPolicyFlags(t *testing.T) {
	for _, c := range []struct {
		req, resp, err string
	}{
		{"{set: {X-Env: prod, A-First: '%CONTOUR_NAMESPACE%'}, remove: [X-Debug]}", "{set: {X-Served-By: portico}}", ""},
		{"{set: {X-Env: prod}, add: {X: y}}", "", `--request-headers-policy: error unmarshaling JSON: while decoding JSON: json: unknown field "add"`},
		{"{set: {Content-Length: '1'}}", "", `request headers: set "Content-Length": Content-Length is written by the data plane`},
		{"{set: {Host: '%REQ(X-Host)%'}}", "", `request headers: set Host "%REQ(X-Host)%": the Host of every service's requests cannot come from a request header`},
		{"{set: {X-A: \"a\\nb\"}}", "", `request headers: set "X-A": the value may not contain CR, LF or NUL`},
		{"", "{set: {Server: x}}", "response headers: set Server: the Server header is --server-header-transformation's"},
		{"", "{remove: [Host]}", `response headers: remove "Host": Host is a request header`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		headers := headersPolicyFlags(fs)
		if err := fs.Parse([]string{"--request-headers-policy", c.req, "--response-headers-policy", c.resp}); err != nil {
			t.Fatal(err)
		}
		d, err := headers()
		if got := fmt.Sprint(err); (c.err == "") != (err == nil) || (err != nil && !strings.Contains(got, c.err)) {
			t.Errorf("%q %q: err = %v, want %q", c.req, c.resp, err, c.err)
		}
		if c.err == "" && (d.Request.Set[0].Name != "A-First" || d.Request.Remove[0] != "X-Debug" || d.Response.Set[0].Value != "portico") {
			t.Errorf("%q %q: %+v %+v", c.req, c.resp, d.Request, d.Response)
		}
	}
}

// The examples of docs/contour-config.md read as they are.
func TestContourConfigDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/contour-config.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(examples) < 2 {
		t.Fatalf("%d YAML examples, want the contour.yaml and the ContourConfiguration ones", len(examples))
	}
	for _, ex := range examples {
		fs := flag.NewFlagSet("portico serve", flag.ContinueOnError)
		fs.String("rate-limit-service", "", "")
		if _, err := readConfigFile(fs, writeConfig(t, string(ex[1]))); err != nil {
			t.Errorf("%v in:\n%s", err, ex[1])
		}
	}
}
