//go:build wasip1

// Command mcp-v1 is a hyper-mcp v1 plugin written on the official Go PDK
// (github.com/extism/go-pdk v1.1.3), as community plugins are: it exports
// describe and call, and imports hyper-mcp host functions from
// extism:host/user. internal/plugin's community-ABI tests and the hostile
// suite load it unmodified.
//
// Tools: echo {text}; media (text, image and resource blocks); read_file
// {path}; fetch {url}; enable_extra (sets a var and notifies that the
// tool list changed; describe then lists "extra"); spin; grow; config
// {key}; sample (calls create_message); setvar {size}; biglog.
//
// Config, for the prompt-quota tests: pad_tools N lists N more tools
// pad_0 … pad_N-1, each with a description of pad_description bytes and a
// schema whose one property has a description of pad_schema bytes;
// extra_description makes the run-time tool extra's description that
// many bytes.
package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/extism/go-pdk"
)

//go:wasmimport extism:host/user notify_tool_list_changed
func notifyToolListChanged()

//go:wasmimport extism:host/user notify_progress
func notifyProgress(uint64)

//go:wasmimport extism:host/user notify_logging_message
func notifyLoggingMessage(uint64)

//go:wasmimport extism:host/user create_message
func createMessage(uint64) uint64

type tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

func schema(props ...string) map[string]any {
	p := map[string]any{}
	for _, n := range props {
		p[n] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "object", "properties": p, "required": props}
}

//go:wasmexport describe
func describe() int32 {
	tools := []tool{
		{"echo", "Echo the text back.", schema("text")},
		{"media", "Answer with text, an image and a resource.", schema()},
		{"read_file", "Read a file.", schema("path")},
		{"fetch", "Fetch a URL.", schema("url")},
		{"enable_extra", "Add the tool extra.", schema()},
		{"spin", "Loop forever.", schema()},
		{"grow", "Allocate without end.", schema()},
		{"config", "Read a config key.", schema("key")},
		{"sample", "Ask the host for a model completion.", schema()},
		{"setvar", "Store size bytes in the Extism var big.", schema("size")},
		{"biglog", "Log 100000 bytes.", schema()},
	}
	n := configInt("pad_tools")
	for i := 0; i < n; i++ {
		s := schema("pad")
		s["properties"].(map[string]any)["pad"] = map[string]any{"type": "string", "description": strings.Repeat("s", configInt("pad_schema"))}
		tools = append(tools, tool{fmt.Sprintf("pad_%d", i), strings.Repeat("d", configInt("pad_description")), s})
	}
	if len(pdk.GetVar("extra")) > 0 {
		desc := "Added at run time."
		if n := configInt("extra_description"); n > 0 {
			desc = strings.Repeat("e", n)
		}
		tools = append(tools, tool{"extra", desc, schema()})
	}
	if err := pdk.OutputJSON(map[string]any{"tools": tools}); err != nil {
		pdk.SetError(err)
		return 1
	}
	return 0
}

// configInt is the config value key as a number; 0 when absent.
func configInt(key string) int {
	v, _ := pdk.GetConfig(key)
	n, _ := strconv.Atoi(v)
	return n
}

type content map[string]any

func text(s string) content { return content{"type": "text", "text": s} }

func result(isError bool, c ...content) int32 {
	if err := pdk.OutputJSON(map[string]any{"content": c, "isError": isError}); err != nil {
		pdk.SetError(err)
		return 1
	}
	return 0
}

var sink [][]byte

//go:wasmexport call
func call() int32 {
	var in struct {
		Params struct {
			Name      string            `json:"name"`
			Arguments map[string]string `json:"arguments"`
		} `json:"params"`
	}
	if err := pdk.InputJSON(&in); err != nil {
		pdk.SetError(fmt.Errorf("bad input: %w", err))
		return 1
	}
	args := in.Params.Arguments
	switch in.Params.Name {
	case "echo":
		prog := pdk.AllocateString(`{"progressToken":"t1","progress":1,"total":1}`)
		notifyProgress(prog.Offset())
		logm := pdk.AllocateString(`{"level":"info","data":"echoing"}`)
		notifyLoggingMessage(logm.Offset())
		return result(false, text(args["text"]))
	case "media":
		return result(false, text("look:"),
			content{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(make([]byte, 10))},
			content{"type": "resource", "resource": map[string]any{"uri": "file:///r.txt", "mimeType": "text/plain", "text": "hello"}})
	case "read_file":
		b, err := os.ReadFile(args["path"])
		if err != nil {
			return result(true, text(err.Error()))
		}
		return result(false, text(string(b)))
	case "fetch":
		resp := pdk.NewHTTPRequest(pdk.MethodGet, args["url"]).Send()
		return result(false, text(fmt.Sprintf("%d %s", resp.Status(), resp.Body())))
	case "enable_extra":
		pdk.SetVar("extra", []byte("1"))
		notifyToolListChanged()
		return result(false, text("extra enabled"))
	case "extra":
		return result(false, text("extra ran"))
	case "spin":
		for n := 0; ; n++ {
			if n < 0 {
				break
			}
		}
		return result(false, text("unreachable"))
	case "grow":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "config":
		v, ok := pdk.GetConfig(args["key"])
		return result(!ok, text(v))
	case "biglog":
		pdk.Log(pdk.LogInfo, strings.Repeat("x", 100000))
		return result(false, text("logged"))
	case "setvar":
		var n int
		fmt.Sscan(args["size"], &n)
		pdk.SetVar("big", make([]byte, n))
		return result(false, text(fmt.Sprintf("stored %d", len(pdk.GetVar("big")))))
	case "sample":
		m := pdk.AllocateString(`{"messages":[]}`)
		off := createMessage(m.Offset())
		return result(false, text(fmt.Sprintf("got %d", off)))
	}
	return result(true, text("unknown tool "+strings.TrimSpace(in.Params.Name)))
}

func main() {}
