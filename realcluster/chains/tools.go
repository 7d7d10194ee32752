//go:build tools

// Package tools pins the program this wrapper module builds.
package tools

import _ "github.com/tektoncd/chains/cmd/controller"
