package dag

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// The interpretation of timeout and retry inputs follows seed 002's tables row by row:
// an input that is not usable never rejects the object, it falls back to the proxy's
// default, and the object's status says so.

// DefaultRequestTimeout is the proxy's request timeout when a route sets none (Envoy's).
const DefaultRequestTimeout = 15 * time.Second

// infinity is the timeout value meaning "no timeout".
const infinity = "infinity"

// policyInput is one raw timeout or retry value, with where it came from for messages.
type policyInput struct {
	field string // e.g. `route "/api": timeoutPolicy.request`
	value *intstr.IntOrString
}

// raw is the value as the user wrote it; ok is false when the field is unset or empty.
func (in policyInput) raw() (string, bool) {
	if in.value == nil {
		return "", false
	}
	s := in.value.String()
	return s, s != ""
}

// isNumber reports whether the value was written as a bare number (no unit).
func (in policyInput) isNumber() bool {
	if in.value == nil {
		return false
	}
	if in.value.Type == intstr.Int {
		return true
	}
	_, err := strconv.ParseInt(strings.TrimSpace(in.value.StrVal), 10, 64)
	return err == nil
}

// requestTimeout: 0, 0s, bare numbers, invalid, empty, unset and negative durations mean the
// proxy default (nil); "infinity" means none (0); a positive duration is used as is.
func requestTimeout(in policyInput) (*time.Duration, string) {
	raw, ok := in.raw()
	if !ok {
		return nil, ""
	}
	if raw == infinity {
		return durationPtr(0), ""
	}
	if in.isNumber() {
		return nil, fmt.Sprintf("%s %q has no unit (write e.g. \"10s\"); the proxy default (%s) applies", in.field, raw, DefaultRequestTimeout)
	}
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%s %q is not a duration (e.g. \"10s\", or \"infinity\"); the proxy default (%s) applies", in.field, raw, DefaultRequestTimeout)
	case d <= 0:
		return nil, fmt.Sprintf("%s %q is not positive; the proxy default (%s) applies (use \"infinity\" for no timeout)", in.field, raw, DefaultRequestTimeout)
	}
	return &d, ""
}

// idleTimeout: "0s" and "infinity" disable the idle timeout (0); 0, bare numbers, invalid,
// empty, unset and negative durations mean the proxy default (nil); a positive duration is
// used as is.
func idleTimeout(in policyInput) (*time.Duration, string) {
	raw, ok := in.raw()
	if !ok {
		return nil, ""
	}
	if raw == infinity {
		return durationPtr(0), ""
	}
	if in.isNumber() {
		return nil, fmt.Sprintf("%s %q has no unit (write e.g. \"30s\", or \"0s\" to disable it); the proxy default applies", in.field, raw)
	}
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%s %q is not a duration (e.g. \"30s\", or \"infinity\"); the proxy default applies", in.field, raw)
	case d < 0:
		return nil, fmt.Sprintf("%s %q is negative; the proxy default applies", in.field, raw)
	}
	return &d, ""
}

// perTryTimeout: like the request timeout, except that "infinity" is invalid too.
// A zero result means "unset": each try is bounded by the request timeout only.
func perTryTimeout(in policyInput) (time.Duration, string) {
	raw, ok := in.raw()
	if !ok {
		return 0, ""
	}
	const ignored = "; ignored, each try is bounded by the request timeout only"
	if raw == infinity || in.isNumber() {
		return 0, fmt.Sprintf("%s %q is not a positive duration (e.g. \"250ms\")%s", in.field, raw, ignored)
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		return 0, fmt.Sprintf("%s %q is not a positive duration (e.g. \"250ms\")%s", in.field, raw, ignored)
	}
	return d, ""
}

// retryCount: a positive number is the count, 0 is zero retries, and anything else that
// is set (negative, invalid, a duration) means one retry. empty is true when the count is
// unset or "", which with no status codes means "no retries".
func retryCount(in policyInput) (n uint32, empty bool, note string) {
	raw, ok := in.raw()
	if !ok {
		return 1, true, ""
	}
	v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	switch {
	case err != nil || v > int64(^uint32(0)):
		return 1, false, fmt.Sprintf("%s %q is not a number of retries; 1 retry applies", in.field, raw)
	case v < 0:
		return 1, false, fmt.Sprintf("%s %q is negative; 1 retry applies", in.field, raw)
	}
	return uint32(v), false, ""
}

// retriableCodes lists the codes from 500 to 509 that may be retried.
func retriableCodes() []uint32 {
	out := make([]uint32, 0, 10)
	for c := uint32(500); c <= 509; c++ {
		out = append(out, c)
	}
	return out
}

// statusCodes: "50x" is 500-509, and each of "500".."509" is itself; anything else (other
// codes, other classes like "40x", negative numbers, durations) falls back to all of
// 500-509. empty is true when no code is given.
func statusCodes(field string, values []intstr.IntOrString) (codes []uint32, empty bool, notes []string) {
	if len(values) == 0 {
		return retriableCodes(), true, nil
	}
	seen := map[uint32]bool{}
	for _, v := range values {
		raw := strings.TrimSpace(v.String())
		if strings.EqualFold(raw, "50x") {
			for _, c := range retriableCodes() {
				seen[c] = true
			}
			continue
		}
		c, err := strconv.ParseUint(raw, 10, 32)
		if err != nil || c < 500 || c > 509 {
			notes = append(notes, fmt.Sprintf("%s %q is not a status code from 500 to 509 (or \"50x\"); all of 500-509 are retried", field, raw))
			for _, c := range retriableCodes() {
				seen[c] = true
			}
			continue
		}
		seen[uint32(c)] = true
	}
	for c := range seen {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes, false, notes
}

// rawRetryPolicy is a retry policy as written, from an IngressRoute or Ingress annotations.
type rawRetryPolicy struct {
	count         policyInput
	statusCodes   []intstr.IntOrString
	codesField    string
	perTryTimeout policyInput
}

// buildTimeouts interprets a route's timeouts; nil when both are the proxy defaults.
func buildTimeouts(request, idle policyInput) (*TimeoutPolicy, []string) {
	var notes []string
	req, n1 := requestTimeout(request)
	idl, n2 := idleTimeout(idle)
	for _, n := range []string{n1, n2} {
		if n != "" {
			notes = append(notes, n)
		}
	}
	if req == nil && idl == nil {
		return nil, notes
	}
	return &TimeoutPolicy{Request: req, Idle: idl}, notes
}

// buildRetry interprets a retry policy under the route's timeouts; nil means no retries
// (neither a count nor status codes given).
func buildRetry(in rawRetryPolicy, timeouts *TimeoutPolicy) (*RetryPolicy, []string) {
	n, countEmpty, note := retryCount(in.count)
	var notes []string
	if note != "" {
		notes = append(notes, note)
	}
	codes, codesEmpty, codeNotes := statusCodes(in.codesField, in.statusCodes)
	notes = append(notes, codeNotes...)
	if countEmpty && codesEmpty {
		if _, set := in.perTryTimeout.raw(); set {
			notes = append(notes, fmt.Sprintf("%s is ignored: the retry policy has neither a count nor status codes, so nothing is retried", in.perTryTimeout.field))
		}
		return nil, notes
	}
	rp := &RetryPolicy{NumRetries: n, OnStatusCodes: codes}
	perTry, note := perTryTimeout(in.perTryTimeout)
	if note != "" {
		notes = append(notes, note)
	}
	if perTry > 0 {
		limit := DefaultRequestTimeout
		if timeouts != nil && timeouts.Request != nil {
			limit = *timeouts.Request
		}
		if limit > 0 && perTry > limit {
			notes = append(notes, fmt.Sprintf("%s %s is longer than the request timeout (%s); ignored", in.perTryTimeout.field, perTry, limit))
			perTry = 0
		}
	}
	rp.PerTryTimeout = perTry
	return rp, notes
}

func durationPtr(d time.Duration) *time.Duration { return &d }
