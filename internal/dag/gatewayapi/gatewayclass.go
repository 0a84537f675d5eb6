package gatewayapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/consts"

	"github.com/portico-dev/portico/internal/dag"
)

// classResult is a GatewayClass of Portico's controller and whether its Gateways are
// served.
type classResult struct {
	class    *gatewayv1.GatewayClass
	accepted bool
}

// processClasses returns the classes of Portico's controller by name, with their
// status. Classes of other controllers are not Portico's: no status.
func processClasses(p *dag.Processing) map[string]*classResult {
	out := map[string]*classResult{}
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
			Conditions:        []metav1.Condition{cond, supportedVersion()},
			SupportedFeatures: supportedFeatures(),
		}}
		p.AddStatus(st)
	}
	return out
}

// BundleVersion is the Gateway API release whose resources Portico implements: that of
// the gateway-api module it is built with.
const BundleVersion = consts.BundleVersion

// supportedVersion is the class's SupportedVersion condition. Portico reads the objects
// with the types of BundleVersion; the CRDs' own bundle-version annotations are not in
// the store (the source does not watch CustomResourceDefinitions), so the condition
// states the version Portico implements rather than comparing it with the cluster's.
func supportedVersion() metav1.Condition {
	return condition(string(gatewayv1.GatewayClassConditionStatusSupportedVersion), true, string(gatewayv1.GatewayClassReasonSupportedVersion),
		"Portico implements Gateway API "+BundleVersion+"; install the CRDs of that release")
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
