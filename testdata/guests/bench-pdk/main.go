//go:build wasip1

// Command bench-pdk is the Extism twin of testkit's echo tools, built on
// the official Go PDK (github.com/extism/go-pdk v1.1.3) so internal/plugin's
// benchmarks can compare a dsh:host/v1 tool call with the same work done
// through extism go-sdk's Plugin.Call. Its exports decode {"text": ...}
// from the input, send one JSON log request to the host function
// extism:host/user::log, and output the text: "echo" decodes with package
// jsonobj (the decoder of dsh's SDK fast path), "echo_json" with
// encoding/json.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
	"github.com/extism/go-pdk"
)

// hostLog is the host's log function. It takes the Extism-kernel offset of
// a JSON {"level", "message"} request, the same request testkit's echo
// sends to dsh:host/v1::log.
//
//go:wasmimport extism:host/user log
func hostLog(offset uint64)

type logRequest struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

var (
	args   jsonobj.Obj
	logBuf []byte
)

//go:wasmexport echo
func echo() int32 {
	input := pdk.Input()
	if err := args.Parse(input); err != nil {
		pdk.SetError(fmt.Errorf("echo: bad arguments: %w", err))
		return 1
	}
	v, ok := args.Lookup("text")
	text, verbatim := v.Verbatim()
	if !ok || !verbatim {
		var err error
		if text, err = v.AppendText(nil); err != nil {
			pdk.SetError(fmt.Errorf("echo: argument text: %w", err))
			return 1
		}
	}
	logBuf = append(logBuf[:0], `{"level":"debug","message":`...)
	logBuf = append(jsonobj.AppendQuote(logBuf, "echo"), '}')
	mem := pdk.AllocateBytes(logBuf)
	hostLog(mem.Offset())
	mem.Free()
	pdk.Output(text)
	return 0
}

//go:wasmexport echo_json
func echoJSON() int32 {
	var a struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(pdk.Input(), &a); err != nil {
		pdk.SetError(fmt.Errorf("echo: bad arguments: %w", err))
		return 1
	}
	req, err := json.Marshal(logRequest{Level: "debug", Message: "echo"})
	if err != nil {
		pdk.SetError(fmt.Errorf("echo: encode log request: %w", err))
		return 1
	}
	mem := pdk.AllocateBytes(req)
	hostLog(mem.Offset())
	mem.Free()
	pdk.OutputString(a.Text)
	return 0
}

func main() {}
