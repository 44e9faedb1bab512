package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
)

func communityGuest(t testing.TB, name string) string {
	t.Helper()
	p, err := guestbuild.Build("testdata/guests/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommunityV1DescribeAndCall(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	p, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")})
	if err != nil {
		t.Fatal(err)
	}
	if p.ABI() != ABIHyperMCPv1 {
		t.Errorf("ABI = %q, want %q", p.ABI(), ABIHyperMCPv1)
	}
	tools := p.Contribution().Tools
	if len(tools) != 9 || tools[0].Name != "echo" || tools[0].Description != "Echo the text back." || !strings.Contains(string(tools[0].Parameters), `"text"`) {
		t.Fatalf("tools = %+v", tools)
	}
	res, err := h.CallTool(ctx, agent("a1", "m"), "echo", []byte(`{"text":"hi there"}`))
	if err != nil || res.IsError || res.Text != "hi there" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	res, err = h.CallTool(ctx, agent("a1", "m"), "media", nil)
	if err != nil || res.Text != "look:\n[image: image/png, 10 bytes]\n[resource: file:///r.txt, text/plain, 5 bytes]" {
		t.Fatalf("media = %+v, %v", res, err)
	}
}
