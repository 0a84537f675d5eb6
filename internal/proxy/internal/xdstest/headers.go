// Package xdstest builds the xDS values the proxy's tests feed its layers,
// so that the tests of package proxy and those of the layers below it share
// one way of writing them.
package xdstest

import corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

// Header append actions by the names the tests give them.
const (
	AppendOrAdd     = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
	IfAbsent        = corev3.HeaderValueOption_ADD_IF_ABSENT
	OverwriteOrAdd  = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	OverwriteExists = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS
)

// HVO is a HeaderValueOption.
func HVO(name, value string, action corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}, AppendAction: action}
}

// Set is how the translator emits "set" (OVERWRITE_IF_EXISTS_OR_ADD).
func Set(name, value string) *corev3.HeaderValueOption { return HVO(name, value, OverwriteOrAdd) }
