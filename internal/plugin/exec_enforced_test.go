package plugin

import (
	"encoding/json"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
)

// The public report carries everything the jail reports, field for field:
// a field added to the jail's report and not here fails this test.
func TestExecEnforcedMirrorsTheJail(t *testing.T) {
	want, err := json.Marshal(execjail.Enforced())
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(ExecEnforced())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("ExecEnforced() = %s\nthe jail reports  %s", got, want)
	}
}
