package extism

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// The community ABIs: what their exports take and give. Each speaks MCP
// through two exports of an Extism plugin: one lists the tools, one calls
// a tool.
const (
	// HyperMCPv1 is hyper-mcp's v1 plugin ABI: exports describe and
	// call, and imports hyper-mcp host functions.
	HyperMCPv1 = "hyper-mcp-v1"
	// HyperMCPv2 is hyper-mcp's v2 plugin ABI: exports list_tools and
	// call_tool, which take an MCP request context.
	HyperMCPv2 = "hyper-mcp-v2"
	// MCPRun is the mcp.run servlet ABI: describe and call, like
	// hyper-mcp v1, without hyper-mcp's host functions.
	MCPRun = "mcp-run"
)

// MaxConfigBytes caps the plugin's config as Extism sees it (keys and
// values); a bigger config refuses the load. go-sdk applies no limit to
// config; ours is explicit.
const MaxConfigBytes = 1 << 20

// Exports are the exports abi lists its tools with and calls one with.
func Exports(abi string) (list, call string) {
	if abi == HyperMCPv2 {
		return "list_tools", "call_tool"
	}
	return "describe", "call"
}

// Tool is a tool as describe and list_tools give it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ListInput is the input of abi's list export; nextID numbers hyper-mcp
// v2's request contexts (it is called only for those).
func ListInput(abi string, nextID func() int64) []byte {
	if abi != HyperMCPv2 {
		return nil
	}
	input, _ := json.Marshal(map[string]json.RawMessage{"context": requestContext(nextID())})
	return input
}

// requestContext is hyper-mcp's PluginRequestContext.
func requestContext(id int64) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": id, "_meta": map[string]any{}})
	return b
}

// DecodeTools reads the list export's output; a tool without an input
// schema takes any object.
func DecodeTools(out []byte) ([]Tool, error) {
	var r struct {
		Tools []Tool `json:"tools"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("want {\"tools\":[...]}: %w", err)
	}
	for i, t := range r.Tools {
		if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
			r.Tools[i].InputSchema = json.RawMessage(`{"type":"object"}`)
		}
	}
	return r.Tools, nil
}

// CallInput is the input of abi's call export for the tool name with
// args, one JSON object spliced in as it is (the caller checked it);
// nextID numbers hyper-mcp v2's request contexts (it is called only for
// those).
func CallInput(abi, name string, args []byte, nextID func() int64) []byte {
	input := make([]byte, 0, len(args)+len(name)+64)
	if abi == HyperMCPv2 {
		input = append(input, `{"request":{"name":`...)
		input = append(jsonobj.AppendQuote(input, name), `,"arguments":`...)
		input = append(input, args...)
		input = append(input, `},"context":{"id":`...)
		input = strconv.AppendInt(input, nextID(), 10)
		return append(input, `,"_meta":{}}}`...)
	}
	input = append(input, `{"params":{"name":`...)
	input = append(jsonobj.AppendQuote(input, name), `,"arguments":`...)
	input = append(input, args...)
	return append(input, `}}`...)
}

// Config turns the plugin's JSON config into Extism's string map:
// strings as they are, other values as JSON.
func Config(cfg []byte) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &m); err != nil {
		return nil, fmt.Errorf("an Extism plugin's config must be a JSON object: %w", err)
	}
	out := make(map[string]string, len(m))
	size := 0
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			s = string(v)
		}
		out[k] = s
		size += len(k) + len(s)
	}
	if size > MaxConfigBytes {
		return nil, fmt.Errorf("config of %d bytes exceeds the Extism config limit of %d", size, MaxConfigBytes)
	}
	return out, nil
}

// Results renders an instance's tool results; it keeps its parse buffers
// from one call to the next. The zero Results is ready.
type Results struct {
	mu         sync.Mutex
	res, block jsonobj.Obj
	text       []byte
}

// Text renders the common CallToolResult, whose content blocks are
// all text, with package jsonobj: no reflection, one allocation. ok false
// sends the caller to ResultText.
func (x *Results) Text(out []byte) (text string, isErr, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.res.Parse(out) != nil {
		return "", false, false
	}
	if v, found := x.res.Lookup("isError"); found {
		switch v.Kind() {
		case jsonobj.Bool:
			isErr, _ = v.Bool()
		case jsonobj.Null:
		default:
			return "", false, false
		}
	}
	cv, found := x.res.Lookup("content")
	if !found || cv.Kind() != jsonobj.Array {
		return "", false, false
	}
	buf := x.text[:0]
	n := 0
	ok = eachObject(cv.Raw(), func(el []byte) bool {
		if x.block.Parse(el) != nil {
			return false
		}
		t, _ := x.block.Lookup("type")
		if tb, ok := t.Verbatim(); !ok || string(tb) != "text" {
			return false
		}
		tv, _ := x.block.Lookup("text")
		if n > 0 {
			buf = append(buf, '\n')
		}
		n++
		var err error
		buf, err = tv.AppendText(buf)
		return err == nil
	})
	x.text = buf
	if !ok || n == 0 {
		return "", false, false
	}
	return string(buf), isErr, true
}

// eachObject calls fn with each element of a JSON array that jsonobj has
// already validated; it stops with false at an element that is not an
// object or when fn says so.
func eachObject(arr []byte, fn func([]byte) bool) bool {
	i := 1 // after '['
	for {
		for i < len(arr) && (arr[i] == ' ' || arr[i] == '\t' || arr[i] == '\n' || arr[i] == '\r' || arr[i] == ',') {
			i++
		}
		if i >= len(arr) || arr[i] == ']' {
			return true
		}
		if arr[i] != '{' {
			return false
		}
		start, depth, inStr := i, 0, false
		for ; i < len(arr); i++ {
			c := arr[i]
			if inStr {
				if c == '\\' {
					i++
				} else if c == '"' {
					inStr = false
				}
				continue
			}
			if c == '"' {
				inStr = true
			} else if c == '{' || c == '[' {
				depth++
			} else if c == '}' || c == ']' {
				depth--
				if depth == 0 {
					i++
					break
				}
			}
		}
		if !fn(arr[start:i]) {
			return false
		}
	}
}

// ResultText renders an MCP CallToolResult for the model: text blocks
// as they are; images, audio and embedded resources summarised with their
// type and size; resource links by URI.
func ResultText(out []byte) (string, bool, error) {
	var r struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
			URI      string `json:"uri"`
			Resource *struct {
				URI      string  `json:"uri"`
				MimeType string  `json:"mimeType"`
				Text     *string `json:"text"`
				Blob     string  `json:"blob"`
			} `json:"resource"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "", false, fmt.Errorf("want an MCP CallToolResult: %w", err)
	}
	var sb strings.Builder
	for i, c := range r.Content {
		if i > 0 {
			sb.WriteByte('\n')
		}
		switch c.Type {
		case "text":
			sb.WriteString(c.Text)
		case "image", "audio":
			fmt.Fprintf(&sb, "[%s: %s, %d bytes]", c.Type, orUnknown(c.MimeType), base64Len(c.Data))
		case "resource":
			if c.Resource == nil {
				sb.WriteString("[resource: missing]")
				break
			}
			n := base64Len(c.Resource.Blob)
			if c.Resource.Text != nil {
				n = len(*c.Resource.Text)
			}
			fmt.Fprintf(&sb, "[resource: %s, %s, %d bytes]", c.Resource.URI, orUnknown(c.Resource.MimeType), n)
		case "resource_link":
			fmt.Fprintf(&sb, "[resource link: %s]", c.URI)
		default:
			fmt.Fprintf(&sb, "[%s content]", orUnknown(c.Type))
		}
	}
	if len(r.Content) == 0 && len(r.StructuredContent) > 0 {
		sb.Write(r.StructuredContent)
	}
	s := sb.String()
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s, r.IsError, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// base64Len is the decoded size of s, without decoding it.
func base64Len(s string) int {
	s = strings.TrimRight(s, "=")
	return base64.RawStdEncoding.DecodedLen(len(s))
}
