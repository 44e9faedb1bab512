package config

import (
	"strings"
	"testing"
)

func TestEntryABI(t *testing.T) {
	e, err := Load("p.yaml", []byte("source: ./time.wasm\nabi: hyper-mcp-v2\n"))
	if err != nil || e.ABI != "hyper-mcp-v2" {
		t.Fatalf("abi: %+v, %v", e, err)
	}
	_, err = Load("p.yaml", []byte("source: ./time.wasm\nabi: extism\n"))
	if err == nil || !strings.Contains(err.Error(), `p.yaml:2: abi: "extism" is not one of dsh, hyper-mcp-v1, hyper-mcp-v2, mcp-run`) {
		t.Fatalf("bad abi: %v", err)
	}
	bad := Entry{Source: "./x.wasm", ABI: "v3"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "abi") {
		t.Fatalf("Validate: %v", err)
	}
}
