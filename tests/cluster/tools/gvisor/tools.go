//go:build tools

// Package tools pins gVisor's runsc and containerd-shim-runsc-v1 (package
// gvisor.dev/gvisor/shim), which the test node runs pods under. The version
// is a commit of gVisor's Go-only "go" branch, the one that builds with plain
// go build. Test tooling only; never shipped.
package tools

import (
	_ "gvisor.dev/gvisor/runsc"
	_ "gvisor.dev/gvisor/shim"
)
