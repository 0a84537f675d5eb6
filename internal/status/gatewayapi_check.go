package status

// The conditions of Gateway API objects in `portico check` and GET /statuses: in JSON, an
// Entry's `conditions` (each scoped to a listener or a parent when it is about one) and
// `listeners` (each listener's attachedRoutes); in the table, a section after it, one
// block per object.

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// Condition is one condition of a Gateway API object's status, as `check -o json` prints
// it. Listener or Parent says what part of the object it is about; neither: the object
// itself.
type Condition struct {
	// Listener is the name of the Gateway's or ListenerSet's listener.
	Listener string `json:"listener,omitempty"`
	// Parent is the route's parent (or the policy's ancestor), as "Gateway ns/name" with
	// its sectionName and port when the reference has them.
	Parent  string `json:"parent,omitempty"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// Listener is a listener of a Gateway or ListenerSet with the routes attached to it.
type Listener struct {
	Name           string `json:"name"`
	AttachedRoutes int32  `json:"attachedRoutes"`
}

// gatewayAPIDetails are the conditions and listeners of st, if it is a Gateway API
// object's.
func gatewayAPIDetails(st *dag.Status) ([]Condition, []Listener) {
	g := st.GatewayAPI
	if g == nil {
		return nil, nil
	}
	var conds []Condition
	var listeners []Listener
	add := func(listener, parent string, cs []metav1.Condition) {
		for _, c := range cs {
			conds = append(conds, Condition{Listener: listener, Parent: parent, Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
		}
	}
	switch {
	case g.GatewayClass != nil:
		add("", "", g.GatewayClass.Conditions)
	case g.Gateway != nil:
		add("", "", g.Gateway.Conditions)
		for _, l := range g.Gateway.Listeners {
			listeners = append(listeners, Listener{Name: string(l.Name), AttachedRoutes: l.AttachedRoutes})
			add(string(l.Name), "", l.Conditions)
		}
	case g.ListenerSet != nil:
		add("", "", g.ListenerSet.Conditions)
		for _, l := range g.ListenerSet.Listeners {
			listeners = append(listeners, Listener{Name: string(l.Name), AttachedRoutes: l.AttachedRoutes})
			add(string(l.Name), "", l.Conditions)
		}
	case g.Route != nil:
		for _, p := range g.Route.Parents {
			add("", describeParent(p.ParentRef, st.Object.Namespace), p.Conditions)
		}
	case g.Policy != nil:
		for _, a := range g.Policy.Ancestors {
			add("", describeParent(a.AncestorRef, st.Object.Namespace), a.Conditions)
		}
	}
	return conds, listeners
}

// describeParent names a parentRef as a person reads it: "Gateway infra/public", with
// the namespace of the referring object when the reference has none.
func describeParent(ref gatewayv1.ParentReference, ns string) string {
	kind := "Gateway"
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	out := fmt.Sprintf("%s %s/%s", kind, ns, ref.Name)
	if ref.SectionName != nil {
		out += fmt.Sprintf(" sectionName %s", *ref.SectionName)
	}
	if ref.Port != nil {
		out += fmt.Sprintf(" port %d", *ref.Port)
	}
	return out
}

// writeGatewayAPIDetails writes, after the table, each Gateway API object's conditions:
// the object's own, then each listener's with its attached routes, or each parent's.
func writeGatewayAPIDetails(w io.Writer, entries []Entry) error {
	var b strings.Builder
	for _, e := range entries {
		if len(e.Conditions) == 0 && len(e.Listeners) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nGateway API conditions:\n")
		}
		fmt.Fprintf(&b, "\n%s %s\n", e.Kind, objectName(e))
		attached := map[string]int32{}
		for _, l := range e.Listeners {
			attached[l.Name] = l.AttachedRoutes
		}
		scope := "\x00"
		for _, c := range e.Conditions {
			if s := c.Listener + "\x00" + c.Parent; s != scope {
				scope = s
				switch {
				case c.Listener != "":
					fmt.Fprintf(&b, "  listener %s (%d attached routes):\n", c.Listener, attached[c.Listener])
				case c.Parent != "":
					fmt.Fprintf(&b, "  parent %s:\n", c.Parent)
				}
			}
			indent := "  "
			if c.Listener != "" || c.Parent != "" {
				indent = "    "
			}
			fmt.Fprintf(&b, "%s%s=%s %s", indent, c.Type, c.Status, c.Reason)
			if c.Message != "" {
				fmt.Fprintf(&b, ": %s", c.Message)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func objectName(e Entry) string {
	if e.Namespace == "" {
		return e.Name
	}
	return e.Namespace + "/" + e.Name
}
