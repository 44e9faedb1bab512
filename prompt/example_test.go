package prompt_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// A deployment persona references the model; the loop owns the fact and
// supplies it per agent.
func Example() {
	r := prompt.NewRegistry(nil)
	prompt.RegisterHarnessSections(r, "You are coding-agent, powered by the {{model}} model.")
	r.RegisterVariable("model", func(_ context.Context, ac prompt.AssembleContext) (string, bool, error) {
		if ac.Agent == nil || ac.Agent.Model == "" {
			return "", false, nil
		}
		return ac.Agent.Model, true, nil
	})
	r.RegisterSection(prompt.Section{Name: "tool:bash", Order: 105, Text: "Check the [exit code: N] marker of every bash result."})

	a, _ := r.Assemble(context.Background(), prompt.AssembleContext{Agent: &prompt.AgentFacts{Model: "deepseek-chat"}})
	text, err := prompt.Render(a)
	fmt.Println(text)
	fmt.Println(err)
	// Output:
	// You are an AI agent running on dsh-wasm, a runtime whose tools are sandboxed WebAssembly plugins.
	//
	// You are coding-agent, powered by the deepseek-chat model.
	//
	// Check the [exit code: N] marker of every bash result.
	// <nil>
}

// Strict rendering refuses to ship a typo to the model.
func ExampleRender() {
	a := &prompt.Assembly{
		Sections:  []prompt.AssembledSection{{Name: "deployment:persona", Text: "Powered by {{modle}}."}},
		Variables: map[string]prompt.Value{"model": {Text: "deepseek-chat", OK: true}},
	}
	_, err := prompt.Render(a)
	fmt.Println(err)
	fmt.Println(errors.Is(err, prompt.ErrUnknownVariable))
	// Output:
	// render section "deployment:persona": unknown variable {{modle}} at byte 11 (registered: model)
	// true
}

// A plugin that owns a late-bound model states it on the assemble
// waterfall, so a {{model}} persona renders even though the agent's
// options carry no model.
func ExampleRegistry_RegisterAssembleHook() {
	r := prompt.NewRegistry(nil)
	r.RegisterSection(prompt.Section{Name: "deployment:persona", Text: "Powered by {{model}}."})
	r.RegisterVariable("model", func(context.Context, prompt.AssembleContext) (string, bool, error) {
		return "", false, nil
	})
	r.RegisterAssembleHook("router", func(ctx context.Context, ac prompt.AssembleContext, next prompt.AssembleFunc) (*prompt.Assembly, error) {
		a, err := next(ctx, ac)
		if err != nil {
			return nil, err
		}
		a.SetVariable("model", "deepseek-reasoner")
		return a, nil
	})
	a, _ := r.Assemble(context.Background(), prompt.AssembleContext{})
	text, _ := prompt.Render(a)
	fmt.Println(text)
	// Output: Powered by deepseek-reasoner.
}

// Registration refuses what could never be referenced or would be
// ambiguous.
func ExampleRegistry_RegisterVariable() {
	r := prompt.NewRegistry(nil)
	_, err := r.RegisterVariable("Model", func(context.Context, prompt.AssembleContext) (string, bool, error) { return "", false, nil })
	fmt.Println(err)
	fmt.Println(errors.Is(err, prompt.ErrInvalidVariable))
	// Output:
	// register variable "Model": invalid variable name: must match [a-z][a-z0-9_]*
	// true
}
