# Sourced by every script that runs the go command. Portico builds with Go 1.27 (the Gateway
# API conformance suite, sigs.k8s.io/gateway-api v1.7.0, needs it). A machine may start on an
# older Go whose environment says GOTOOLCHAIN=local and so ignores go.mod's go line: naming
# the release here makes the go command fetch it from the module proxy once (about 76 MB)
# and use it from then on. PORTICO_GOTOOLCHAIN overrides it (e.g. "local" on a machine whose
# own Go is 1.27 or newer and must not download another).
export GOTOOLCHAIN=${PORTICO_GOTOOLCHAIN:-go1.27.3}
