package gatewayapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// frontendValidation is the client certificate validation of a Gateway's HTTPS
// listeners on port (spec.tls.frontend): the port's own entry, else the default; nil
// when there is none.
func frontendValidation(gw *gatewayv1.Gateway, port gatewayv1.PortNumber) (*gatewayv1.FrontendTLSValidation, string) {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil, ""
	}
	f := gw.Spec.TLS.Frontend
	for i, pp := range f.PerPort {
		if pp.Port == port {
			return pp.TLS.Validation, fmt.Sprintf("spec.tls.frontend.perPort[%d].tls.validation", i)
		}
	}
	return f.Default.Validation, "spec.tls.frontend.default.validation"
}

// insecureFrontend reports whether a Gateway lets clients in whose certificate is
// missing or fails validation on some port (mode AllowInsecureFallback): its status
// says so (InsecureFrontendValidationMode).
func insecureFrontend(gw *gatewayv1.Gateway) bool {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return false
	}
	f := gw.Spec.TLS.Frontend
	if v := f.Default.Validation; v != nil && v.Mode == gatewayv1.AllowInsecureFallback {
		return true
	}
	for _, pp := range f.PerPort {
		if v := pp.TLS.Validation; v != nil && v.Mode == gatewayv1.AllowInsecureFallback {
			return true
		}
	}
	return false
}

// resolveFrontendValidation gives an HTTPS listener of gw the client validation of its
// port. A reference that cannot be used sets ResolvedRefs false on the listener;
// without any usable CA the listener is not accepted (NoValidCACertificate), never
// served without the validation it asks for.
func resolveFrontendValidation(p *dag.Processing, gw *gatewayv1.Gateway, ls *listenerState, grants grantIndex) {
	if ls.spec.Protocol != gatewayv1.HTTPSProtocolType {
		return
	}
	v, field := frontendValidation(gw, ls.spec.Port)
	if v == nil {
		return
	}
	var bundle []byte
	for i, ref := range v.CACertificateRefs {
		ca, err := frontendCA(p, gw.Namespace, ref, fmt.Sprintf("%s.caCertificateRefs[%d]", field, i), grants)
		if err != nil {
			if ls.check.resolvedRefs == nil {
				ls.check.resolvedRefs = err
			}
			continue
		}
		bundle = append(bundle, ca...)
	}
	if len(bundle) == 0 {
		ls.check.accepted = newError(string(gatewayv1.ListenerConditionAccepted), string(gatewayv1.ListenerReasonNoValidCACertificate),
			"%s: no usable CA certificate (see ResolvedRefs): the listener is not served rather than served without client certificate validation", field)
		return
	}
	ls.clients = &dag.ClientValidation{CACert: bundle}
	if v.Mode == gatewayv1.AllowInsecureFallback {
		// Any client gets in, as the mode says: the certificate, if any, is still
		// asked for, for the backend to see.
		ls.clients.Optional, ls.clients.SkipVerify = true, true
	}
}

// frontendCA returns the CA bundle of one caCertificateRef: key ca.crt of a ConfigMap
// (or a Secret), in the Gateway's namespace or one whose ReferenceGrant allows it.
func frontendCA(p *dag.Processing, gwNS string, ref gatewayv1.ObjectReference, field string, grants grantIndex) ([]byte, *condError) {
	refErr := func(reason gatewayv1.ListenerConditionReason, format string, args ...any) *condError {
		return newError(string(gatewayv1.ListenerConditionResolvedRefs), string(reason), field+": "+format, args...)
	}
	group, kind := coreGroup(string(ref.Group)), string(ref.Kind)
	if group != "" || (kind != "ConfigMap" && kind != "Secret") {
		return nil, refErr(gatewayv1.ListenerReasonInvalidCACertificateKind, "%s %q is not supported: refer to a ConfigMap (or a Secret) with a %s key", kind, ref.Group, caKey)
	}
	ns := gwNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	if !grants.permitted(objectKind{groupName, "Gateway"}, gwNS, objectKind{"", kind}, ns, string(ref.Name)) {
		return nil, refErr(gatewayv1.ListenerReasonRefNotPermitted,
			"%s %s/%s is in another namespace and no ReferenceGrant there allows Gateways of namespace %s to use it; add one", kind, ns, ref.Name, gwNS)
	}
	key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	var data []byte
	if kind == "ConfigMap" {
		cm := p.Store().ConfigMaps[key]
		if cm == nil {
			return nil, refErr(gatewayv1.ListenerReasonInvalidCACertificateRef, "ConfigMap %s not found", key)
		}
		data = []byte(cm.Data[caKey])
	} else {
		s := p.Secret(key)
		if s == nil {
			return nil, refErr(gatewayv1.ListenerReasonInvalidCACertificateRef, "Secret %s not found", key)
		}
		data = s.Data[caKey]
	}
	if len(data) == 0 {
		return nil, refErr(gatewayv1.ListenerReasonInvalidCACertificateRef, "%s %s has no key %s", kind, key, caKey)
	}
	if !dag.ValidCABundle(data) {
		return nil, refErr(gatewayv1.ListenerReasonInvalidCACertificateRef, "%s %s: %s holds no PEM certificate", kind, key, caKey)
	}
	return data, nil
}
