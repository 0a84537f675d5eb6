package accesslog

import (
	"fmt"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
)

// Check refuses an access log the proxy cannot write as asked.
func Check(al *accesslogv3.AccessLog) error {
	if al.GetFilter() != nil {
		return fmt.Errorf("access_log %q: filter is not supported", al.GetName())
	}
	tc := al.GetTypedConfig()
	if tc == nil || !(tc.MessageIs(&streamv3.StdoutAccessLog{}) || tc.MessageIs(&streamv3.StderrAccessLog{})) {
		return fmt.Errorf("access_log %q is not supported (only envoy.access_loggers.stdout / stderr)", al.GetName())
	}
	return nil
}
