//go:build tools

// Package tools pins helm, which the chart tests (tests/chart) run: lint,
// template, and install/upgrade/test/uninstall on the real node. Test
// tooling only; never shipped.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
