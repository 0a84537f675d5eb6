package dag

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

const (
	// AnnotationIngressClass is the deprecated class annotation; it wins over
	// spec.ingressClassName when both are set (seed 000, "Interoperability").
	AnnotationIngressClass = "kubernetes.io/ingress.class"
	// AnnotationContourIngressClass is Contour's class annotation; on an Ingress it wins
	// over AnnotationIngressClass, as in Contour.
	AnnotationContourIngressClass = "projectcontour.io/ingress.class"
	// AnnotationDefaultClass marks the IngressClass that Ingresses without a class get.
	AnnotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
)

// classDecision says whether an Ingress is Portico's and, if not, why.
type classDecision struct {
	ours   bool
	reason string
}

// servesClass reports whether name is one of the configured classes (a handful: a
// scan is cheaper than a map).
func (o *Options) servesClass(name string) bool {
	return slices.Contains(o.IngressClassNames, name)
}

// classesText names the configured classes for a status: "portico", or "one of" them.
func (o *Options) classesText() string {
	if len(o.IngressClassNames) == 1 {
		return strconv.Quote(o.IngressClassNames[0])
	}
	quoted := make([]string, len(o.IngressClassNames))
	for i, n := range o.IngressClassNames {
		quoted[i] = strconv.Quote(n)
	}
	return "one of " + strings.Join(quoted, ", ")
}

// ingressClassAnnotation returns the class an Ingress's annotations name, Contour's
// first, and whether one does.
func ingressClassAnnotation(ing *networkingv1.Ingress) (name, annotation string, ok bool) {
	for _, a := range []string{AnnotationContourIngressClass, AnnotationIngressClass} {
		if v, ok := ing.Annotations[a]; ok {
			return v, a, true
		}
	}
	return "", "", false
}

// ingressClass decides whether ing belongs to Portico:
//   - a class annotation (projectcontour.io/ingress.class, else
//     kubernetes.io/ingress.class), when present, must be one of the configured classes;
//   - otherwise spec.ingressClassName must name one of the configured classes, or an
//     IngressClass whose spec.controller is Portico's;
//   - an Ingress with neither is Portico's unless an IngressClass marked default belongs to
//     another controller (with no default class at all, Portico adopts class-less Ingresses).
//
// defaults are b.defaultClasses(), found once for all the Ingresses of a build.
func (b *builder) ingressClass(ing *networkingv1.Ingress, defaults []*networkingv1.IngressClass) classDecision {
	if class, annotation, ok := ingressClassAnnotation(ing); ok {
		if b.opts.servesClass(class) {
			return classDecision{ours: true}
		}
		return classDecision{reason: fmt.Sprintf("annotation %s=%q names another class (Portico serves %s)", annotation, class, b.opts.classesText())}
	}
	if name := ing.Spec.IngressClassName; name != nil {
		if b.opts.servesClass(*name) {
			return classDecision{ours: true}
		}
		if ic, ok := b.store.IngressClasses[*name]; ok && ic.Spec.Controller == ControllerName {
			return classDecision{ours: true}
		}
		return classDecision{reason: fmt.Sprintf("spec.ingressClassName %q is not handled by Portico (Portico serves class %s and IngressClasses with controller %q)", *name, b.opts.classesText(), ControllerName)}
	}
	if len(defaults) == 0 {
		return classDecision{ours: true}
	}
	for _, ic := range defaults {
		if ic.Spec.Controller == ControllerName || b.opts.servesClass(ic.Name) {
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
