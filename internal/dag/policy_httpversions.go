package dag

import (
	"slices"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// proxyHTTPVersions are the versions of spec.httpVersions; nil: both (or none valid).
func proxyHTTPVersions(vs []contourv1.HTTPVersionType) []HTTPVersion {
	var out []HTTPVersion
	for _, v := range vs {
		var hv HTTPVersion
		switch v {
		case contourv1.HTTPVersion1:
			hv = HTTP1
		case contourv1.HTTPVersion2:
			hv = HTTP2
		default:
			continue
		}
		if !slices.Contains(out, hv) {
			out = append(out, hv)
		}
	}
	if len(out) == 2 {
		return nil
	}
	return out
}
