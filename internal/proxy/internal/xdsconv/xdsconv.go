// Package xdsconv holds what every layer of the embedded proxy needs when it
// converts Envoy resources: the error that names the first field it cannot
// honour (the text of a NACK), the reading of inline data sources and
// addresses, and Envoy's StringMatcher, which routes, CORS and authorization
// all match with. It is a
// leaf: it imports go-control-plane types and nothing of the proxy.
package xdsconv

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Field is a configuration field by its path in the resource, and whether
// the resource sets it.
type Field struct {
	name string
	set  bool
}

// Set pairs a field's path with whether it is set, for Unsupported.
func Set(name string, set bool) Field { return Field{name: name, set: set} }

// Unsupported returns an error naming the first field that is set, so that a
// NACK says precisely what the proxy cannot honour.
func Unsupported(fields ...Field) error {
	for _, f := range fields {
		if f.set {
			return fmt.Errorf("%s is not supported", f.name)
		}
	}
	return nil
}

// InlineData returns the bytes of an inline DataSource; files and environment
// variables are not read by the embedded proxy.
func InlineData(ds *corev3.DataSource) ([]byte, error) {
	if ds.GetWatchedDirectory() != nil {
		return nil, errors.New("watched_directory is not supported")
	}
	switch s := ds.GetSpecifier().(type) {
	case *corev3.DataSource_InlineBytes:
		return s.InlineBytes, nil
	case *corev3.DataSource_InlineString:
		return []byte(s.InlineString), nil
	}
	return nil, fmt.Errorf("data source %T is not supported (only inline_bytes and inline_string)", ds.GetSpecifier())
}
