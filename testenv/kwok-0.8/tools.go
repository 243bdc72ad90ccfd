// Written like testenv/gen-gomod.sh's helm-4.3/tools.go.

//go:build tools

// Package tools pins kwok's main package, built by build.sh with
// `go build sigs.k8s.io/kwok/cmd/kwok` from inside this module.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
