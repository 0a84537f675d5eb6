module github.com/portico-dev/portico/hack/kube/images

go 1.26.4

tool sigs.k8s.io/gateway-api-conformance-images/echo-basic

require (
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260523011958-0a33c5d7ca68 // indirect
	google.golang.org/grpc v1.82.1 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	sigs.k8s.io/gateway-api-conformance-images v0.1.0 // indirect
)
