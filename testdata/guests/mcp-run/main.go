//go:build wasip1

// Command mcp-run is an mcp.run servlet on the official Go PDK
// (github.com/extism/go-pdk v1.1.3): describe and call, importing nothing
// of hyper-mcp, but the legacy extism:host/user config_get old servlets
// use. Tools: greet {name} (the greeting comes from config); echo {text},
// the 1 KiB echo of the community-ABI benchmark.
package main

import (
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
	"github.com/extism/go-pdk"
)

//go:wasmimport extism:host/user config_get
func legacyConfigGet(uint64) uint64

func legacyConfig(key string) string {
	k := pdk.AllocateString(key)
	off := legacyConfigGet(k.Offset())
	if off == 0 {
		return ""
	}
	m := pdk.FindMemory(off)
	return string(m.ReadBytes())
}

//go:wasmexport describe
func describe() int32 {
	pdk.OutputString(`{"tools":[` +
		`{"name":"greet","description":"Greet someone.","inputSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},` +
		`{"name":"run_echo","description":"Echo the text back.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`)
	return 0
}

var (
	in, params, args jsonobj.Obj
	out, textBuf     []byte
)

//go:wasmexport call
func call() int32 {
	if err := in.Parse(pdk.Input()); err != nil {
		pdk.SetErrorString("bad input: " + err.Error())
		return 1
	}
	pv, _ := in.Lookup("params")
	if err := params.Parse(pv.Raw()); err != nil {
		pdk.SetErrorString("bad params: " + err.Error())
		return 1
	}
	nv, _ := params.Lookup("name")
	name, _ := nv.Text()
	av, _ := params.Lookup("arguments")
	if err := args.Parse(av.Raw()); err != nil {
		pdk.SetErrorString("bad arguments: " + err.Error())
		return 1
	}
	var text string
	switch name {
	case "greet":
		v, _ := args.Lookup("name")
		who, _ := v.Text()
		text = legacyConfig("greeting") + ", " + who
	case "run_echo":
		// Decoded into a buffer kept from call to call: one copy of the
		// text for AppendQuote's string, not two.
		v, _ := args.Lookup("text")
		textBuf, _ = v.AppendText(textBuf[:0])
		text = string(textBuf)
	default:
		pdk.SetErrorString("unknown tool " + name)
		return 1
	}
	out = append(out[:0], `{"content":[{"type":"text","text":`...)
	out = append(jsonobj.AppendQuote(out, text), `}]}`...)
	pdk.Output(out)
	return 0
}

func main() {}
