package v1beta1

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ServiceList is a route's "service" field, which the seed writes both as one service
// and as a list of them.
type ServiceList []Service

// UnmarshalJSON accepts a single service object or a list of them. Unknown fields are
// errors, as they are everywhere else in a strictly decoded manifest.
func (l *ServiceList) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		*l = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if len(data) > 0 && data[0] == '{' {
		var s Service
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("service: %w", err)
		}
		*l = ServiceList{s}
		return nil
	}
	var list []Service
	if err := dec.Decode(&list); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	*l = list
	return nil
}
