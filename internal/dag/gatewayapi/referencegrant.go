package gatewayapi

import (
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/store"
)

// objectKind is a group and kind, with "" for the core group.
type objectKind struct{ group, kind string }

// grantIndex holds, per namespace, the ReferenceGrants that let objects of other
// namespaces refer to it: built once per build, asked for every cross-namespace
// reference (backends, certificates).
type grantIndex map[string][]*gatewayv1.ReferenceGrant

func indexGrants(s *store.Store) grantIndex {
	out := grantIndex{}
	for _, rg := range s.ReferenceGrants {
		out[rg.Namespace] = append(out[rg.Namespace], rg)
	}
	return out
}

// permitted reports whether an object of kind from in namespace fromNS may refer to
// the object named toName of kind to in namespace toNS: always within a namespace,
// across namespaces only when a ReferenceGrant in toNS allows it.
func (g grantIndex) permitted(from objectKind, fromNS string, to objectKind, toNS, toName string) bool {
	if fromNS == toNS {
		return true
	}
	for _, rg := range g[toNS] {
		if grantAllows(rg, from, fromNS, to, toName) {
			return true
		}
	}
	return false
}

func grantAllows(rg *gatewayv1.ReferenceGrant, from objectKind, fromNS string, to objectKind, toName string) bool {
	fromOK := false
	for _, f := range rg.Spec.From {
		if coreGroup(string(f.Group)) == from.group && string(f.Kind) == from.kind && string(f.Namespace) == fromNS {
			fromOK = true
			break
		}
	}
	if !fromOK {
		return false
	}
	for _, t := range rg.Spec.To {
		if coreGroup(string(t.Group)) == to.group && string(t.Kind) == to.kind && (t.Name == nil || string(*t.Name) == toName) {
			return true
		}
	}
	return false
}

// coreGroup spells the core group "" however it was written.
func coreGroup(g string) string {
	if g == "core" {
		return ""
	}
	return g
}
