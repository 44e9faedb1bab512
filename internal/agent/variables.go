package agent

import (
	"context"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Names of the built-in prompt variables.
const (
	// VarModel is the agent's model (Options.Model); it has no value for
	// an agent without one.
	VarModel = "model"
	// VarCwd is the working directory in the agent's session header; it
	// has no value for a cwd-less session.
	VarCwd = "cwd"
)

// RegisterBuiltinVariables registers the loop's built-in variables, model
// and cwd, in reg, in one update. Both are pure projections of the agent
// facts the loop assembles each step's prompt with, so they are registered
// once per registry, for every agent that assembles from it. It returns
// their disposers, model first.
func RegisterBuiltinVariables(reg *prompt.Registry) ([]prompt.Disposer, error) {
	var ds []prompt.Disposer
	err := reg.Update(func(tx *prompt.Tx) error {
		m, err := tx.AddVariable(VarModel, modelVariable)
		if err != nil {
			return err
		}
		c, err := tx.AddVariable(VarCwd, cwdVariable)
		if err != nil {
			return err
		}
		ds = []prompt.Disposer{m, c}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("agent: register built-in variables: %w", err)
	}
	return ds, nil
}

func modelVariable(_ context.Context, ac prompt.AssembleContext) (string, bool, error) {
	if ac.Agent == nil || ac.Agent.Model == "" {
		return "", false, nil
	}
	return ac.Agent.Model, true, nil
}

func cwdVariable(_ context.Context, ac prompt.AssembleContext) (string, bool, error) {
	if ac.Agent == nil || ac.Agent.Cwd == "" {
		return "", false, nil
	}
	return ac.Agent.Cwd, true, nil
}
