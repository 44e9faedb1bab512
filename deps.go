//go:build tools

package tools

import (
	_ "github.com/extism/go-sdk"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/tetratelabs/wazero"
	_ "gopkg.in/yaml.v3"
)
