package translate

import (
	"testing"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
)

// TestIncrementalTranslationEqualsFullWithGatewayAPI is
// TestIncrementalTranslationEqualsFull with Gateway API objects among the changes:
// the Gateways' listeners, route configurations, secrets and clusters too.
func TestIncrementalTranslationEqualsFullWithGatewayAPI(t *testing.T) {
	incrementalTranslationEqualsFull(t, 15, 60, dagtest.RunGatewayAPI, dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}})
}
