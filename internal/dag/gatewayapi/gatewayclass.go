package gatewayapi

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/consts"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// classResult is a GatewayClass of Portico's controller and whether its Gateways are
// served.
type classResult struct {
	class    *gatewayv1.GatewayClass
	accepted bool
}

// processClasses returns the classes of Portico's controller by name, and their
// statuses. Classes of other controllers are not Portico's: no status.
func processClasses(p *dag.Processing) (map[string]*classResult, []dag.Status) {
	out := map[string]*classResult{}
	var statuses []dag.Status
	version := supportedVersion(p.Store())
	for name, gc := range p.Store().GatewayClasses {
		if gc.Spec.ControllerName != dag.GatewayControllerName {
			continue
		}
		res := &classResult{class: gc, accepted: true}
		cond := condition(string(gatewayv1.GatewayClassConditionStatusAccepted), true,
			string(gatewayv1.GatewayClassReasonAccepted), "Portico serves the Gateways of this class")
		var errs []dag.Problem
		if err := validateClassParameters(gc); err != nil {
			res.accepted = false
			cond = condition(err.Type, false, err.Reason, err.Message)
			errs = append(errs, err.problem(""))
		}
		out[name] = res
		st := summary(dag.ObjectRef{Kind: dag.KindGatewayClass, Name: name}, errs, nil, "accepted: Portico serves its Gateways")
		st.GatewayAPI = &dag.GatewayAPIStatus{GatewayClass: &gatewayv1.GatewayClassStatus{
			Conditions:        []metav1.Condition{cond, version},
			SupportedFeatures: supportedFeatures(),
		}}
		statuses = append(statuses, st)
	}
	return out, statuses
}

// BundleVersion is the Gateway API release whose resources Portico implements: that of
// the gateway-api module it is built with.
const BundleVersion = consts.BundleVersion

// supportedVersion is the classes' SupportedVersion condition: True when every Gateway
// API CRD the store knows carries a bundle-version annotation of BundleVersion's minor
// release (patch releases do not change the API), or when it knows none (`portico run`
// reads manifests, not CRDs). Otherwise False, UnsupportedVersion: Portico serves what
// it can of the objects (the class stays accepted), the message says what to install.
func supportedVersion(s *store.Store) metav1.Condition {
	minor := BundleVersion[:strings.LastIndex(BundleVersion, ".")+1] // "v1.7."
	var other []string
	for _, name := range slices.Sorted(maps.Keys(s.GatewayAPICRDs)) {
		v := s.GatewayAPICRDs[name].Annotations[consts.BundleVersionAnnotation]
		if !strings.HasPrefix(v, minor) {
			other = append(other, fmt.Sprintf("%s (%s)", name, cmp.Or(v, "no "+consts.BundleVersionAnnotation+" annotation")))
		}
	}
	if len(other) > 0 {
		return condition(string(gatewayv1.GatewayClassConditionStatusSupportedVersion), false, string(gatewayv1.GatewayClassReasonUnsupportedVersion),
			fmt.Sprintf("Portico implements Gateway API %s, and these CRDs are of another release: %s; install the CRDs of %s", BundleVersion, strings.Join(other, ", "), BundleVersion))
	}
	return condition(string(gatewayv1.GatewayClassConditionStatusSupportedVersion), true, string(gatewayv1.GatewayClassReasonSupportedVersion),
		"Portico implements Gateway API "+BundleVersion)
}

// validateClassParameters refuses a parametersRef: Portico's classes take no
// parameters, and a class whose parameters are ignored would not do what it says.
func validateClassParameters(gc *gatewayv1.GatewayClass) *condError {
	ref := gc.Spec.ParametersRef
	if ref == nil {
		return nil
	}
	return newError(string(gatewayv1.GatewayClassConditionStatusAccepted), string(gatewayv1.GatewayClassReasonInvalidParameters),
		"spec.parametersRef (%s %s) is not supported: Portico's GatewayClasses take no parameters; remove it", ref.Kind, ref.Name)
}
