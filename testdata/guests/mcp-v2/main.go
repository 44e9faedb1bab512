//go:build wasip1

// Command mcp-v2 is a hyper-mcp v2 plugin on the official Go PDK
// (github.com/extism/go-pdk v1.1.3): it exports list_tools and call_tool,
// and like real v2 plugins (rstime) it refuses a list_tools input without
// the MCP request context. Tools: echo {text}; whoami (the request
// context it was given); counter (an Extism var that counts calls).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/extism/go-pdk"
)

type requestContext struct {
	ID   json.RawMessage `json:"id"`
	Meta map[string]any  `json:"_meta"`
}

func needContext(c *requestContext) error {
	if c == nil || len(c.ID) == 0 || c.Meta == nil {
		return errors.New("missing field `context`: want {id, _meta}")
	}
	return nil
}

//go:wasmexport list_tools
func listTools() int32 {
	var in struct {
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil {
		pdk.SetError(err)
		return 1
	}
	if err := needContext(in.Context); err != nil {
		pdk.SetError(err)
		return 1
	}
	obj := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
	err := pdk.OutputJSON(map[string]any{"tools": []map[string]any{
		{"name": "v2_echo", "description": "Echo the text back.", "inputSchema": obj},
		{"name": "v2_whoami", "description": "Show the request context.", "inputSchema": map[string]any{"type": "object"}},
		{"name": "v2_counter", "description": "Count calls in an Extism var.", "inputSchema": map[string]any{"type": "object"}},
	}})
	if err != nil {
		pdk.SetError(err)
		return 1
	}
	return 0
}

//go:wasmexport call_tool
func callTool() int32 {
	var in struct {
		Request struct {
			Name      string            `json:"name"`
			Arguments map[string]string `json:"arguments"`
		} `json:"request"`
		Context *requestContext `json:"context"`
	}
	if err := pdk.InputJSON(&in); err != nil {
		pdk.SetError(err)
		return 1
	}
	if err := needContext(in.Context); err != nil {
		pdk.SetError(err)
		return 1
	}
	var out string
	switch in.Request.Name {
	case "v2_echo":
		out = in.Request.Arguments["text"]
	case "v2_whoami":
		out = fmt.Sprintf("id=%s", in.Context.ID)
	case "v2_counter":
		n, _ := strconv.Atoi(string(pdk.GetVar("n")))
		n++
		pdk.SetVar("n", []byte(strconv.Itoa(n)))
		out = strconv.Itoa(n)
	default:
		pdk.SetError(fmt.Errorf("unknown tool %q", in.Request.Name))
		return 1
	}
	if err := pdk.OutputJSON(map[string]any{"content": []map[string]any{{"type": "text", "text": out}}}); err != nil {
		pdk.SetError(err)
		return 1
	}
	return 0
}

func main() {}
