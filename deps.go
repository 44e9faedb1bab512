//go:build tools

package tools

import (
	_ "github.com/extism/go-sdk"
	_ "github.com/extism/go-pdk"
	_ "github.com/tetratelabs/wazero"
	_ "gopkg.in/yaml.v3"
)
