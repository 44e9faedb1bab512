package deploy

import (
	"context"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// The ACP child's permission requests are rejected unless the provider
// is configured to allow them, and a request without an option of the
// policy's kind is cancelled, never allowed.
func TestACPPermissionPolicy(t *testing.T) {
	opts := []acp.PermissionOption{
		{OptionId: "yes", Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow"},
		{OptionId: "no", Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject"},
	}
	pick := func(allow bool, o []acp.PermissionOption) string {
		r, err := (&acpClient{allow: allow}).RequestPermission(context.Background(), acp.RequestPermissionRequest{Options: o})
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome.Selected == nil {
			return "cancelled"
		}
		return string(r.Outcome.Selected.OptionId)
	}
	if got := pick(false, opts); got != "no" {
		t.Fatalf("default policy picked %q, want the reject option", got)
	}
	if got := pick(true, opts); got != "yes" {
		t.Fatalf("allowing policy picked %q, want the allow option", got)
	}
	if got := pick(false, opts[:1]); got != "cancelled" {
		t.Fatalf("default policy with only an allow option picked %q, want cancelled", got)
	}
}
