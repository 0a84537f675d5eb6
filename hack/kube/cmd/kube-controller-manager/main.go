// Command kube-controller-manager is the upstream kube-controller-manager, exactly as
// k8s.io/kubernetes/cmd/kube-controller-manager builds it, at the version hack/kube/go.mod
// pins. internal/kubetest runs it with a handful of controllers (deployment, replicaset,
// endpointslice, ...) for tests that want real workloads.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	command := app.NewControllerManagerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
