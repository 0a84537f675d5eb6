// Package webhook is Portico's validating admission webhook (`portico serve
// --webhook-addr`): the API server asks it about every Ingress, IngressRoute and
// HTTPProxy created or updated, and it refuses those of Portico's class that are
// invalid on their own, with the message their status would carry. What makes an
// object invalid only in the company of others (a host or path an older object holds,
// a missing Service or Secret, delegations) is admitted: the status reports it, and
// the build keeps serving whoever was there first.
//
// Gateway API objects are never refused: they are admitted with warnings saying what
// their status will report as wrong, others' objects included (a missing Service, a
// listener that does not allow the route). The Gateway API reports problems in status
// conditions; its conformance suite applies invalid objects on purpose to check them,
// and GitOps tools apply objects in any order.
package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/store"
)

// Path is where the webhook is served; a ValidatingWebhookConfiguration's
// clientConfig points at it (service.path, or the path of url).
const Path = "/validate"

// maxBodyBytes bounds a request: an AdmissionReview holds at most two objects of at
// most etcd's request limit (1.5 MiB) each.
const maxBodyBytes = 4 << 20

// Config configures a Handler.
type Config struct {
	// DAG are the controller's build options: the class it serves, root namespaces,
	// whether it serves Ingresses at all.
	DAG dag.Options
	// Namespaces are the namespaces the controller watches; empty means all. Objects
	// elsewhere are not Portico's, and are admitted.
	Namespaces []string
	// Store returns the latest objects the controller has read, for the decisions that
	// depend on them (the class of an Ingress through IngressClasses). While it returns
	// nil (the controller has not read the cluster yet) everything is admitted: an
	// Ingress without a class may belong to another controller's default IngressClass.
	// A nil Store means no IngressClass exists.
	Store func() *store.Store
	// Logger records refusals (info) and admissions (debug); nil discards.
	Logger *slog.Logger
}

// Handler answers AdmissionReview requests (admission.k8s.io/v1).
type Handler struct {
	cfg   Config
	log   *slog.Logger
	kinds map[schema.GroupVersionKind]decodeFunc
}

// NewHandler returns a Handler for cfg.
func NewHandler(cfg Config) *Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, log: log, kinds: kinds()}
}

// ServeHTTP answers a POSTed AdmissionReview with the review's response. A request
// that is not an AdmissionReview is answered 400 (the API server then applies the
// webhook's failurePolicy).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", maxBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	review, err := decodeReview(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := h.Review(review.Request)
	out, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// decodeReview reads an AdmissionReview request, or says what is wrong with it.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("the request body is not a JSON AdmissionReview: %v", err)
	}
	if gv := admissionv1.SchemeGroupVersion.String(); review.APIVersion != gv || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want %s AdmissionReview (set admissionReviewVersions: [v1])", review.APIVersion, review.Kind, gv)
	}
	if review.Request == nil {
		return nil, errors.New("the AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, errors.New("the AdmissionReview's request has no uid")
	}
	return &review, nil
}

// Review decides on one admission request.
//
//   - Only CREATE and UPDATE of the kinds Portico validates are looked at: everything
//     else (DELETE, other kinds, objects of other classes or of namespaces the
//     controller does not watch, anything before the controller has read the cluster)
//     is admitted.
//   - An object with problems of its own is refused with its status message.
//   - An UPDATE that adds no problem to those the stored object already has is
//     admitted, with the message as a warning: refusing it would keep nothing from
//     being served, and would block unrelated edits (labels, finalizers) of objects
//     created while the webhook was not running, or before a Portico upgrade.
//   - Values that fall back to a default (seed 002) are admitted with a warning each.
//   - Gateway API objects are admitted, with what their status would report as wrong
//     as warnings (warnGatewayAPI).
func (h *Handler) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allow := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	decode, known := h.kinds[schema.GroupVersionKind(req.Kind)]
	if !known || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return allow
	}
	// Cluster-scoped objects (GatewayClasses) are read whatever namespaces are watched.
	if req.Namespace != "" && len(h.cfg.Namespaces) > 0 && !slices.Contains(h.cfg.Namespaces, req.Namespace) {
		return allow
	}
	log := h.log.With("kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation, "user_claimed", req.UserInfo.Username)
	warnOnly := req.Kind.Group == gatewayv1.GroupName
	obj, err := decode(req.Object.Raw)
	if err != nil {
		msg := "not served: the object cannot be read: " + err.Error()
		if warnOnly {
			log.Info("admitted an object that cannot be read, with a warning", "reason", msg)
			allow.Warnings = boundedWarnings([]string{msg})
			return allow
		}
		log.Info("admission refused", "reason", msg)
		return refuse(req, msg)
	}
	var s *store.Store
	if h.cfg.Store != nil {
		if s = h.cfg.Store(); s == nil {
			log.Debug("admitted: the cluster has not been read yet")
			return allow
		}
	}
	if warnOnly {
		return h.warnGatewayAPI(allow, obj, s, log)
	}
	v := dag.ValidateObject(obj, s, h.cfg.DAG)
	if !v.Ours {
		return allow
	}
	allow.Warnings = v.Notes
	if len(v.Problems) == 0 {
		log.Debug("admitted", "warnings", len(allow.Warnings))
		return allow
	}
	if req.Operation == admissionv1.Update && req.OldObject.Raw != nil {
		if old, err := decode(req.OldObject.Raw); err == nil {
			if ov := dag.ValidateObject(old, s, h.cfg.DAG); ov.Ours && subset(v.Problems, ov.Problems) {
				log.Info("admitted an update of an invalid object that adds no problem", "status", v.Message())
				allow.Warnings = append([]string{v.Message()}, v.Notes...)
				return allow
			}
		}
	}
	log.Info("admission refused", "reason", v.Message())
	return refuse(req, v.Message())
}

// warnGatewayAPI admits a Gateway API object with a warning for each problem its
// status would report, in the status's words; an object Portico writes no status for
// (another controller's) gets none.
func (h *Handler) warnGatewayAPI(allow *admissionv1.AdmissionResponse, obj runtime.Object, s *store.Store, log *slog.Logger) *admissionv1.AdmissionResponse {
	f := gatewayapi.ObjectFindings(obj, s, h.cfg.DAG)
	msgs := make([]string, len(f.Problems))
	for i, p := range f.Problems {
		msgs[i] = p.Message
	}
	allow.Warnings = boundedWarnings(msgs)
	log.Debug("admitted", "ours", f.Ours, "problems", len(f.Problems))
	return allow
}

// The API server passes at most 4,096 characters of warnings on to the client; past
// that, it cuts each to 256 (k8s.io/apiserver's warning recorder), and it drops a
// warning holding a control character. kubectl prints each on a line of its own.
const (
	maxWarnings     = 8
	maxWarningRunes = 256
)

// boundedWarnings are msgs as the API server passes them on whole: each on one line of
// at most maxWarningRunes runes, at most maxWarnings of them, the last saying how many
// more the object's status holds.
func boundedWarnings(msgs []string) []string {
	var out []string
	for i, m := range msgs {
		if i == maxWarnings-1 && len(msgs) > maxWarnings {
			return append(out, fmt.Sprintf("and %d more problems: see the object's status", len(msgs)-i))
		}
		out = append(out, oneLine(m))
	}
	return out
}

// oneLine is m with control characters (and invalid UTF-8) as spaces, cut to
// maxWarningRunes runes.
func oneLine(m string) string {
	m = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, m)
	if utf8.RuneCountInString(m) > maxWarningRunes {
		m = string([]rune(m)[:maxWarningRunes-1]) + "…"
	}
	return m
}

// refuse is a denial whose message the API server passes on to the client, after
// `admission webhook "NAME" denied the request: `.
func refuse(req *admissionv1.AdmissionRequest, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		UID:     req.UID,
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusUnprocessableEntity,
			Reason:  metav1.StatusReasonInvalid,
			Message: msg,
		},
	}
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// decodeFunc reads the object of an admission request.
type decodeFunc func(raw []byte) (runtime.Object, error)
