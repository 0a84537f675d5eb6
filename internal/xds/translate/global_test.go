package translate

import (
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/dag"
)

// The global TLS versions bound each host's: the higher floor, the lower ceiling; a
// host whose floor is above the installation's ceiling keeps its floor.
func TestGlobalTLSVersions(t *testing.T) {
	const (
		v12 = tlsv3.TlsParameters_TLSv1_2
		v13 = tlsv3.TlsParameters_TLSv1_3
	)
	for _, c := range []struct {
		globalMin, globalMax, hostMin, hostMax string
		lo, hi                                 tlsv3.TlsParameters_TlsProtocol
	}{
		{"", "", "", "", v12, v13},
		{"", "", "1.3", "", v13, v13},
		{"1.3", "", "", "", v13, v13},
		{"1.3", "", "1.2", "", v13, v13},
		{"1.2", "", "1.3", "", v13, v13},
		{"", "1.2", "", "", v12, v12},
		{"", "1.2", "", "1.3", v12, v12},
		{"", "1.3", "", "1.2", v12, v12},
		{"", "1.2", "1.3", "", v13, v13},
	} {
		g := Global{MinTLSVersion: c.globalMin, MaxTLSVersion: c.globalMax}
		if lo, hi := g.tlsVersions(c.hostMin, c.hostMax); lo != c.lo || hi != c.hi {
			t.Errorf("global %q-%q, host %q-%q: %v-%v, want %v-%v", c.globalMin, c.globalMax, c.hostMin, c.hostMax, lo, hi, c.lo, c.hi)
		}
	}
}

func TestCheckGlobal(t *testing.T) {
	neg := -time.Second
	for _, c := range []struct {
		g    Global
		want string
	}{
		{Global{}, ""},
		{Global{ServerHeader: ServerHeaderPassThrough, MinTLSVersion: "1.2", MaxTLSVersion: "1.3"}, ""},
		{Global{ServerHeader: "drop"}, `server header transformation "drop"`},
		{Global{MinTLSVersion: "1.0"}, `minimum TLS version: unknown TLS version "1.0": use 1.2 or 1.3`},
		{Global{MaxTLSVersion: "TLSv1.3"}, `maximum TLS version: unknown TLS version "TLSv1.3"`},
		{Global{MinTLSVersion: "1.3", MaxTLSVersion: "1.2"}, "the minimum TLS version 1.3 is above the maximum 1.2"},
		{Global{StreamIdleTimeout: &neg}, "stream idle timeout -1s is negative"},
		{Global{ConnectTimeout: -1}, "connect timeout -1ns is negative"},
		{Global{CipherSuites: DefaultCipherSuites, UpstreamCipherSuites: CipherSuiteNames}, ""},
		{Global{CipherSuites: []string{"ECDHE-RSA-AES128-GCM-SHA256", "DES-CBC3-SHA"}}, `unknown cipher suite "DES-CBC3-SHA"`},
		{Global{CipherSuites: []string{"[AES128-SHA|TLS_AES_128_GCM_SHA256]"}}, `unknown cipher suite "TLS_AES_128_GCM_SHA256"`},
		{Global{UpstreamCipherSuites: []string{"[AES128-SHA|AES256-SHA"}}, `backend cipher suite group "[AES128-SHA|AES256-SHA" has no closing ]`},
	} {
		err := CheckGlobal(c.g)
		if got := errString(err); (c.want == "") != (got == "") || (c.want != "" && !contains(got, c.want)) {
			t.Errorf("%+v: %q, want %q", c.g, got, c.want)
		}
	}
}

// The global settings reach every connection manager, TLS context and route
// configuration, and what comes out validates.
func TestGlobalSettingsTranslate(t *testing.T) {
	g := plainAndSecureHost()
	idle := 90 * time.Second
	for _, c := range []struct {
		name   string
		global Global
		server []*corev3.HeaderValueOption
	}{
		{"defaults", Global{}, serverHeader()},
		{"contour file", Global{StreamIdleTimeout: &idle, ServerHeader: ServerHeaderAppendIfAbsent, DisableMergeSlashes: true,
			StripTrailingHostDot: true, MinTLSVersion: "1.3", ConnectTimeout: 5 * time.Second, CipherSuites: []string{"[AES128-SHA|AES256-SHA]", "ECDHE-RSA-AES128-GCM-SHA256"}},
			[]*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "server", Value: ServerName}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT}}},
		{"pass through", Global{ServerHeader: ServerHeaderPassThrough}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Translate(g, Options{Global: c.global})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range res.Listeners {
				for _, fc := range l.(*listenerv3.Listener).FilterChains {
					var hcm hcmv3.HttpConnectionManager
					if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
						t.Fatal(err)
					}
					if hcm.MergeSlashes == c.global.DisableMergeSlashes || hcm.StripTrailingHostDot != c.global.StripTrailingHostDot {
						t.Errorf("%s: merge_slashes %v, strip_trailing_host_dot %v", fc.Name, hcm.MergeSlashes, hcm.StripTrailingHostDot)
					}
					if got := hcm.StreamIdleTimeout; (c.global.StreamIdleTimeout == nil) != (got == nil) || (got != nil && got.AsDuration() != idle) {
						t.Errorf("%s: stream_idle_timeout %v", fc.Name, got)
					}
					if fc.TransportSocket == nil {
						continue
					}
					var ctx tlsv3.DownstreamTlsContext
					if err := fc.TransportSocket.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
						t.Fatal(err)
					}
					want := tlsv3.TlsParameters_TLSv1_2
					if c.global.MinTLSVersion == "1.3" {
						want = tlsv3.TlsParameters_TLSv1_3
					}
					if got := ctx.CommonTlsContext.TlsParams.TlsMinimumProtocolVersion; got != want {
						t.Errorf("%s: minimum TLS %v, want %v", fc.Name, got, want)
					}
					wantCiphers := c.global.CipherSuites
					if got := ctx.CommonTlsContext.TlsParams.CipherSuites; !slices.Equal(got, wantCiphers) {
						t.Errorf("%s: cipher suites %q, want %q", fc.Name, got, wantCiphers)
					}
				}
			}
			for _, r := range res.Routes {
				if diff := cmp.Diff(c.server, r.(*routev3.RouteConfiguration).ResponseHeadersToAdd, protocmp.Transform()); diff != "" {
					t.Errorf("%s: Server header (-want +got):\n%s", r.(*routev3.RouteConfiguration).Name, diff)
				}
			}
			wantTimeout := 2 * time.Second
			if c.global.ConnectTimeout != 0 {
				wantTimeout = c.global.ConnectTimeout
			}
			for _, cl := range res.Clusters {
				if got := clusterConnectTimeout(cl); got != wantTimeout {
					t.Errorf("connect_timeout %v, want %v", got, wantTimeout)
				}
			}
		})
	}
}

// plainAndSecureHost is a graph of one host served over HTTP and HTTPS.
func plainAndSecureHost() *dag.Graph {
	web := testCluster("default", "web", 80)
	secret := &dag.Secret{Name: "default/cert", Cert: []byte("cert"), Key: []byte("key")}
	vh := dag.VirtualHost{Name: "secure.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}
	g := &dag.Graph{
		HTTP:  []*dag.VirtualHost{&vh},
		HTTPS: []*dag.SecureVirtualHost{{VirtualHost: vh, Secret: secret}},
	}
	return g
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func clusterConnectTimeout(r types.Resource) time.Duration {
	return r.(*clusterv3.Cluster).GetConnectTimeout().AsDuration()
}

// The installation's backend TLS versions and DNS lookup family reach the clusters.
func TestGlobalClusterSettings(t *testing.T) {
	tlsCluster := testCluster("default", "secure", 443)
	tlsCluster.Protocol = "tls"
	ext := testCluster("default", "ext", 80)
	ext.ExternalName = "ext.example.com"
	jwks := testCluster("default", "jwks", 443)
	jwks.ExternalName, jwks.DNSLookupFamily = "idp.example.com", "v6"
	for _, c := range []struct {
		g          Global
		lo, hi     tlsv3.TlsParameters_TlsProtocol
		ciphers    []string
		extFamily  clusterv3.Cluster_DnsLookupFamily
		jwksFamily clusterv3.Cluster_DnsLookupFamily
	}{
		// Contour's default range, written out: Envoy's client default stops at 1.2.
		{g: Global{}, lo: tlsv3.TlsParameters_TLSv1_2, hi: tlsv3.TlsParameters_TLSv1_3, extFamily: clusterv3.Cluster_AUTO, jwksFamily: clusterv3.Cluster_V6_ONLY},
		{g: Global{UpstreamMinTLSVersion: "1.3", DNSLookupFamily: "v4"}, lo: tlsv3.TlsParameters_TLSv1_3, hi: tlsv3.TlsParameters_TLSv1_3,
			extFamily: clusterv3.Cluster_V4_ONLY, jwksFamily: clusterv3.Cluster_V6_ONLY},
		{g: Global{UpstreamCipherSuites: []string{"AES128-SHA", "[ECDHE-RSA-AES128-SHA|ECDHE-RSA-AES256-SHA]"}}, ciphers: []string{"AES128-SHA", "[ECDHE-RSA-AES128-SHA|ECDHE-RSA-AES256-SHA]"},
			lo: tlsv3.TlsParameters_TLSv1_2, hi: tlsv3.TlsParameters_TLSv1_3, extFamily: clusterv3.Cluster_AUTO, jwksFamily: clusterv3.Cluster_V6_ONLY},
		{g: Global{UpstreamMaxTLSVersion: "1.3", DNSLookupFamily: "all"}, lo: tlsv3.TlsParameters_TLSv1_2, hi: tlsv3.TlsParameters_TLSv1_3,
			extFamily: clusterv3.Cluster_ALL, jwksFamily: clusterv3.Cluster_V6_ONLY},
	} {
		g := c.g
		g.ConnectTimeout = 2 * time.Second
		out := cluster(tlsCluster, g)
		if err := out.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		var ctx tlsv3.UpstreamTlsContext
		if err := out.TransportSocket.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
			t.Fatal(err)
		}
		p := ctx.CommonTlsContext.TlsParams
		if p.GetTlsMinimumProtocolVersion() != c.lo || p.GetTlsMaximumProtocolVersion() != c.hi || !slices.Equal(p.GetCipherSuites(), c.ciphers) {
			t.Errorf("%+v: tls_params %v, want %v-%v %q", c.g, p, c.lo, c.hi, c.ciphers)
		}
		if got := cluster(ext, g).DnsLookupFamily; got != c.extFamily {
			t.Errorf("%+v: ExternalName dns_lookup_family %v, want %v", c.g, got, c.extFamily)
		}
		if got := cluster(jwks, g).DnsLookupFamily; got != c.jwksFamily {
			t.Errorf("%+v: a cluster's own dns_lookup_family %v, want %v (its own wins)", c.g, got, c.jwksFamily)
		}
	}
}

// Default HTTP versions choose every connection manager's codec and what HTTPS hosts
// offer by ALPN; a host's own versions replace them.
func TestGlobalDefaultHTTPVersions(t *testing.T) {
	web := testCluster("default", "web", 80)
	secret := &dag.Secret{Name: "default/cert", Cert: []byte("cert"), Key: []byte("key")}
	vh := dag.VirtualHost{Name: "a.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}
	own := dag.VirtualHost{Name: "b.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}
	g := &dag.Graph{
		HTTP:  []*dag.VirtualHost{&vh},
		HTTPS: []*dag.SecureVirtualHost{{VirtualHost: vh, Secret: secret}, {VirtualHost: own, Secret: secret, HTTPVersions: []dag.HTTPVersion{dag.HTTP1, dag.HTTP2}}},
	}
	res, err := Translate(g, Options{Global: Global{DefaultHTTPVersions: []dag.HTTPVersion{dag.HTTP2}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		codec hcmv3.HttpConnectionManager_CodecType
		alpn  []string
	}{
		"":      {hcmv3.HttpConnectionManager_HTTP2, nil},
		"a.com": {hcmv3.HttpConnectionManager_HTTP2, []string{"h2"}},
		"b.com": {hcmv3.HttpConnectionManager_AUTO, []string{"h2", "http/1.1"}},
	}
	for _, l := range res.Listeners {
		for _, fc := range l.(*listenerv3.Listener).FilterChains {
			var hcm hcmv3.HttpConnectionManager
			if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				t.Fatal(err)
			}
			var alpn []string
			if fc.TransportSocket != nil {
				var ctx tlsv3.DownstreamTlsContext
				if err := fc.TransportSocket.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
					t.Fatal(err)
				}
				alpn = ctx.CommonTlsContext.AlpnProtocols
			}
			w := want[fc.Name]
			if hcm.CodecType != w.codec || !slices.Equal(alpn, w.alpn) {
				t.Errorf("chain %q: codec %v, ALPN %v; want %v, %v", fc.Name, hcm.CodecType, alpn, w.codec, w.alpn)
			}
		}
	}
}

// The connection timeouts reach every connection manager (plain and HTTPS), in
// Envoy's fields; unset ones stay out (Envoy's defaults), zero is written as zero
// (disabled) except max_connection_duration, which Envoy only leaves unlimited when
// absent; what comes out validates.
func TestGlobalConnectionTimeouts(t *testing.T) {
	g := plainAndSecureHost()
	d := func(s string) *time.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	str := func(p *durationpb.Duration) string {
		if p == nil {
			return "unset"
		}
		return p.AsDuration().String()
	}
	for _, c := range []struct {
		name string
		in   ConnectionTimeouts
		want [5]string // idle, max duration, drain, delayed close, request
	}{
		{"defaults", ConnectionTimeouts{}, [5]string{"unset", "unset", "unset", "unset", "unset"}},
		{"set", ConnectionTimeouts{Idle: d("60s"), MaxDuration: d("1h"), Drain: d("10s"), DelayedClose: d("2s"), Request: d("30s")},
			[5]string{"1m0s", "1h0m0s", "10s", "2s", "30s"}},
		{"disabled", ConnectionTimeouts{Idle: d("0s"), MaxDuration: d("0s"), Drain: d("0s"), DelayedClose: d("0s"), Request: d("0s")},
			[5]string{"0s", "unset", "0s", "0s", "0s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Translate(g, Options{Global: Global{Connection: c.in}})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, l := range res.Listeners {
				for _, fc := range l.(*listenerv3.Listener).FilterChains {
					var hcm hcmv3.HttpConnectionManager
					if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
						t.Fatal(err)
					}
					if err := hcm.ValidateAll(); err != nil {
						t.Fatal(err)
					}
					n++
					o := hcm.CommonHttpProtocolOptions
					got := [5]string{str(o.IdleTimeout), str(o.MaxConnectionDuration), str(hcm.DrainTimeout), str(hcm.DelayedCloseTimeout), str(hcm.RequestTimeout)}
					if got != c.want {
						t.Errorf("%s/%s: idle, max duration, drain, delayed close, request = %v, want %v", l.(*listenerv3.Listener).Name, fc.Name, got, c.want)
					}
				}
			}
			if n != 2 {
				t.Errorf("%d connection managers, want 2 (HTTP and HTTPS)", n)
			}
		})
	}
	neg := -time.Second
	if err := CheckGlobal(Global{Connection: ConnectionTimeouts{Drain: &neg}}); err == nil || !contains(err.Error(), "connection shutdown grace period -1s is negative") {
		t.Errorf("a negative grace period: %v", err)
	}
}
