package dag

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

const (
	// AnnotationIngressClass is the deprecated class annotation; it wins over
	// spec.ingressClassName when both are set (seed 000, "Interoperability").
	AnnotationIngressClass = "kubernetes.io/ingress.class"
	// AnnotationDefaultClass marks the IngressClass that Ingresses without a class get.
	AnnotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
)

// classDecision says whether an Ingress is Portico's and, if not, why.
type classDecision struct {
	ours   bool
	reason string
}

// ingressClass decides whether ing belongs to Portico:
//   - the annotation, when present, is compared with the configured class name;
//   - otherwise spec.ingressClassName must name the configured class, or an IngressClass
//     whose spec.controller is Portico's;
//   - an Ingress with neither is Portico's unless an IngressClass marked default belongs to
//     another controller (with no default class at all, Portico adopts class-less Ingresses).
//
// defaults are b.defaultClasses(), found once for all the Ingresses of a build.
func (b *builder) ingressClass(ing *networkingv1.Ingress, defaults []*networkingv1.IngressClass) classDecision {
	if ann, ok := ing.Annotations[AnnotationIngressClass]; ok {
		if ann == b.opts.IngressClassName {
			return classDecision{ours: true}
		}
		return classDecision{reason: fmt.Sprintf("annotation %s=%q names another class (Portico serves %q)", AnnotationIngressClass, ann, b.opts.IngressClassName)}
	}
	if name := ing.Spec.IngressClassName; name != nil {
		if *name == b.opts.IngressClassName {
			return classDecision{ours: true}
		}
		if ic, ok := b.store.IngressClasses[*name]; ok && ic.Spec.Controller == ControllerName {
			return classDecision{ours: true}
		}
		return classDecision{reason: fmt.Sprintf("spec.ingressClassName %q is not handled by Portico (Portico serves class %q and IngressClasses with controller %q)", *name, b.opts.IngressClassName, ControllerName)}
	}
	if len(defaults) == 0 {
		return classDecision{ours: true}
	}
	for _, ic := range defaults {
		if ic.Spec.Controller == ControllerName || ic.Name == b.opts.IngressClassName {
			return classDecision{ours: true}
		}
	}
	return classDecision{reason: fmt.Sprintf("no class set, and the default IngressClass %q belongs to controller %q", defaults[0].Name, defaults[0].Spec.Controller)}
}

// defaultClasses returns the IngressClasses annotated as default, ordered by name.
func (b *builder) defaultClasses() []*networkingv1.IngressClass {
	var out []*networkingv1.IngressClass
	for _, ic := range b.store.IngressClasses {
		if strings.EqualFold(ic.Annotations[AnnotationDefaultClass], "true") {
			out = append(out, ic)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
