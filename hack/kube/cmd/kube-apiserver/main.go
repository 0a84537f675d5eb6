// Command kube-apiserver is the upstream kube-apiserver, exactly as
// k8s.io/kubernetes/cmd/kube-apiserver builds it, at the version hack/kube/go.mod pins.
// It lives here (rather than being built as k8s.io/kubernetes/cmd/kube-apiserver) so
// that go mod tidy keeps the k8s.io/kubernetes requirement.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
