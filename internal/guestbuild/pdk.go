//go:build tools

// This file keeps github.com/extism/go-pdk in go.mod: the Extism test
// guests under testdata import it, and go mod tidy does not look there.
package guestbuild

import _ "github.com/extism/go-pdk"
