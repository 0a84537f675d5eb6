package app

import (
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
)

// withGatewayAPI adds the Gateway API processor to a build's options: dag builds
// Gateway API objects through it without importing the package.
func withGatewayAPI(o dag.Options) dag.Options {
	o.Processors = append(o.Processors[:len(o.Processors):len(o.Processors)], gatewayapi.Processor{})
	return o
}
