package cli

import (
	"flag"
	"fmt"

	"sigs.k8s.io/yaml"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
)

// globalAuthFlag adds --global-ext-auth (run, serve and check); the function it
// returns is the authorization it gives (nil without one), or what is wrong with it.
func globalAuthFlag(fs *flag.FlagSet) func() (*dag.GlobalAuthorization, error) {
	v := fs.String("global-ext-auth", "", "external authorization of every HTTPProxy host without its own (`YAML or JSON`, an HTTPProxy's virtualhost.authorization whose extensionRef names its namespace, as Contour's globalExtAuth), such as '{extensionRef: {namespace: auth, name: authz}, authPolicy: {context: {site: all}}}'; it checks every request of the plain HTTP listener too (default: none)")
	return func() (*dag.GlobalAuthorization, error) {
		if *v == "" {
			return nil, nil
		}
		g, err := parseGlobalAuth(*v)
		if err != nil {
			return nil, fmt.Errorf("--global-ext-auth: %w", err)
		}
		return g, nil
	}
}

// parseGlobalAuth parses the value of --global-ext-auth.
func parseGlobalAuth(s string) (*dag.GlobalAuthorization, error) {
	var a contourv1.AuthorizationServer
	if err := yaml.UnmarshalStrict([]byte(s), &a); err != nil {
		return nil, err
	}
	return dag.ParseGlobalAuthorization(&a)
}
