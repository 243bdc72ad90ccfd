// Written like testenv/kwok-0.8/tools.go.

//go:build tools

// Package tools pins the main packages that scripts/build-bench-tools.sh builds from
// inside this module: the Kyverno CLI (`kyverno apply`) and gator (`gator test`).
package tools

import (
	_ "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno"
	_ "github.com/open-policy-agent/gatekeeper/v3/cmd/gator"
)
