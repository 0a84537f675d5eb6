package filter

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Unmarshal decodes a filter's configuration into m and validates it as
// Envoy would (the message's ValidateAll), for Factory.New and ParsePerRoute.
func Unmarshal(a *anypb.Any, m interface {
	proto.Message
	ValidateAll() error
}) error {
	if err := a.UnmarshalTo(m); err != nil {
		return err
	}
	return m.ValidateAll()
}

// Field is a configuration field a filter does not implement, and whether
// the configuration sets it.
type Field struct {
	Name string
	Set  bool
}

// Unsupported is an error naming the first field that is set (a NACK
// saying what the proxy cannot do), or nil.
func Unsupported(fields ...Field) error {
	for _, f := range fields {
		if f.Set {
			return fmt.Errorf("%s is not supported", f.Name)
		}
	}
	return nil
}
