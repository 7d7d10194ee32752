//go:build tools

// Package tools pins the programs this wrapper module builds.
package tools

import _ "github.com/sigstore/rekor-tiles/v2/cmd/rekor-server/posix"
