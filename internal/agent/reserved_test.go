package agent

import (
	"testing"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Every variable the loop registers is reserved for the harness, so no
// plugin can claim one whatever the load order.
func TestLoopVariablesAreReserved(t *testing.T) {
	reg := prompt.NewRegistry(nil)
	if _, err := RegisterBuiltinVariables(reg); err != nil {
		t.Fatal(err)
	}
	_, vars, _ := reg.Names()
	if len(vars) == 0 {
		t.Fatal("no built-in variables")
	}
	for _, v := range vars {
		if !prompt.IsReservedVariable(v) {
			t.Errorf("the loop's variable %q is not reserved (prompt.IsReservedVariable)", v)
		}
	}
}
