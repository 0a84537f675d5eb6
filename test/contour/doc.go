// Package contour holds the Contour corpus test: every HTTPProxy of Contour v1.33's
// examples and documentation (the Go module github.com/projectcontour/contour, fetched
// with `go mod download`) must be as valid in Portico as Contour's documentation says
// it is, and `portico check --contour` must find in them only the differences Portico
// documents.
//
// It is a module of its own so that the release's files are fetched by the go command
// the way CI fetches any module, without Contour's dependencies entering Portico's
// go.mod; hack/test.sh vets, checks and tests it.
package contour
