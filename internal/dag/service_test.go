package dag

import "testing"

// Clusters of one Service port verified differently are different clusters: every
// part of an UpstreamValidation that decides which certificates are accepted, or
// what is sent as SNI, names the cluster.
func TestClusterPolicySuffixTellsValidationsApart(t *testing.T) {
	base := UpstreamValidation{CAName: "ConfigMap team/ca", CACert: []byte("ca"), SubjectNames: []string{"web.example.com"}, ServerName: "web.example.com"}
	variants := map[string]func(v *UpstreamValidation){
		"as is":                     func(*UpstreamValidation) {},
		"another CA":                func(v *UpstreamValidation) { v.CAName = "ConfigMap team/other" },
		"another name":              func(v *UpstreamValidation) { v.SubjectNames = []string{"api.example.com"} },
		"a URI":                     func(v *UpstreamValidation) { v.SubjectURIs = []string{"spiffe://example.com/web"} },
		"another URI":               func(v *UpstreamValidation) { v.SubjectURIs = []string{"spiffe://example.com/api"} },
		"URIs only":                 func(v *UpstreamValidation) { v.SubjectNames, v.SubjectURIs = nil, []string{"spiffe://example.com/web"} },
		"the URI spelled as a name": func(v *UpstreamValidation) { v.SubjectNames = []string{"web.example.com", "spiffe://example.com/web"} },
		"another SNI":               func(v *UpstreamValidation) { v.ServerName = "sni.example.com" },
	}
	seen := map[string]string{}
	for name, change := range variants {
		v := base
		change(&v)
		suffix := clusterPolicy{protocol: "tls", validation: &v}.suffix()
		if other, ok := seen[suffix]; ok {
			t.Errorf("%q and %q share the cluster suffix %s", name, other, suffix)
		}
		seen[suffix] = name
	}
}
