package nodeagent

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Image maps a container image to a binary on this machine: a container of the image
// runs Binary as its entrypoint.
type Image struct {
	// Repository is the image name without tag or digest, as a Pod spells it:
	// "registry.k8s.io/gateway-api/conformance/echo-basic". Every tag and digest of it
	// runs the same Binary.
	Repository string
	// Binary is the path of the executable standing in for the image's entrypoint.
	Binary string
	// Entrypoint is the entrypoint's path inside the image ("/echo-basic"); a container
	// whose command names it (or Binary's base name) runs Binary. Optional.
	Entrypoint string
	// Args are the image's default arguments (its CMD), used when the container gives
	// neither command nor args.
	Args []string
}

// EchoBasicRepositories are the names under which the Gateway API conformance suite's
// manifests (and its releases) refer to its echo server.
var EchoBasicRepositories = []string{
	"registry.k8s.io/gateway-api/conformance/echo-basic",
	"registry.k8s.io/gateway-api/echo-basic",
	"gcr.io/k8s-staging-gateway-api/echo-basic",
	"us-central1-docker.pkg.dev/k8s-staging-images/gateway-api/echo-basic",
}

// PorticoRepository is the image of deploy/ and the Helm chart.
const PorticoRepository = "ghcr.io/portico-dev/portico"

// EchoBasicImages maps every name of the conformance echo server to binary.
func EchoBasicImages(binary string) []Image {
	var images []Image
	for _, r := range EchoBasicRepositories {
		images = append(images, Image{Repository: r, Binary: binary, Entrypoint: "/echo-basic"})
	}
	return images
}

// PorticoImage maps Portico's image to binary (the one the test built).
func PorticoImage(binary string) Image {
	return Image{Repository: PorticoRepository, Binary: binary, Entrypoint: "/portico"}
}

// repository strips the tag and digest from an image reference, and the implied
// "docker.io/library/" of a bare Docker Hub name.
func repository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	image = strings.TrimPrefix(image, "docker.io/")
	return strings.TrimPrefix(image, "library/")
}

// imageSet finds the Image of a reference.
type imageSet []Image

func (s imageSet) lookup(image string) (Image, error) {
	repo := repository(image)
	for _, im := range s {
		if repository(im.Repository) == repo {
			return im, nil
		}
	}
	return Image{}, fmt.Errorf("image %q is not known to the test node agent, which runs only images mapped to local binaries (known: %s); "+
		"map it to a binary in nodeagent.Options.Images (kubetest.WorkloadOptions.Images)", image, s.names())
}

func (s imageSet) names() string {
	var names []string
	for _, im := range s {
		names = append(names, im.Repository)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// argv is the command line of container c of image im, following Kubernetes' rules:
// command replaces the entrypoint (and drops the image's args), args replace the
// image's args.
func (im Image) argv(command, args []string) ([]string, error) {
	if len(command) == 0 {
		if args == nil {
			args = im.Args
		}
		return append([]string{im.Binary}, args...), nil
	}
	if !im.runs(command[0]) {
		return nil, fmt.Errorf("command %q is not in image %s: the test node agent runs only its entrypoint %s", command[0], im.Repository, im.entrypointName())
	}
	return append(append([]string{im.Binary}, command[1:]...), args...), nil
}

func (im Image) runs(name string) bool {
	return name == im.Entrypoint || path.Base(name) == path.Base(im.Binary) || (im.Entrypoint != "" && path.Base(name) == path.Base(im.Entrypoint))
}

func (im Image) entrypointName() string {
	if im.Entrypoint != "" {
		return im.Entrypoint
	}
	return path.Base(im.Binary)
}
