//go:build wasip1

// Command subagent is dsh-wasm's built-in subagent tool, loaded as
// builtin:subagent. It offers one tool, named by its config, that runs a
// child agent on one subagent provider and returns the child's last
// message. The operator grants the provider under grants.subagents.
//
// The tool exists only while its provider does: at load it asks
// subagent_providers, and it follows subagent/provider-added and
// subagent/provider-removed. Its wording comes from the provider's
// InheritsParentContext fact, so the same module reads differently bound
// to spawn (a fresh child) and to fork (a child that inherits the
// completed turns). A deployment loads it once per provider, under
// different plugin names.
//
// Config: provider (default "spawn"), tool_name (default "subagent").
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

func main() {}

func init() { guest.Main(setup) }

type config struct {
	Provider string `json:"provider"`
	ToolName string `json:"tool_name"`
}

var cfg = config{Provider: "spawn", ToolName: "subagent"}

// registered is whether the load-time instance has the tool registered.
var registered bool

func setup(p *guest.Plugin) error {
	if raw := bytes.TrimSpace(p.Config); len(raw) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&cfg); err != nil {
			return fmt.Errorf("subagent config: %w", err)
		}
	}
	if cfg.Provider == "" || cfg.ToolName == "" {
		return errors.New("subagent config: provider and tool_name may not be empty")
	}
	if !p.Loading() {
		// A per-agent instance only runs the tool; the wording is the
		// load-time instance's business.
		return p.Tool(toolFor(false), run)
	}
	if err := p.On("subagent/provider-added", onAdded); err != nil {
		return err
	}
	if err := p.On("subagent/provider-removed", onRemoved); err != nil {
		return err
	}
	providers, err := guest.SubagentProviders()
	if err != nil {
		return err
	}
	for _, pr := range providers {
		if pr.Name == cfg.Provider {
			registered = true
			return p.Tool(toolFor(pr.InheritsParentContext), run)
		}
	}
	return nil
}

type providerEvent struct {
	Provider hostfns.SubagentProvider `json:"provider"`
}

func decodeEvent(payload []byte) (hostfns.SubagentProvider, error) {
	var e providerEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return e.Provider, fmt.Errorf("subagent: provider event: %w", err)
	}
	return e.Provider, nil
}

func onAdded(_ guest.Context, payload []byte) error {
	pr, err := decodeEvent(payload)
	if err != nil || pr.Name != cfg.Provider {
		return err
	}
	// A provider of the same name may come back with other facts: word
	// the tool afresh. The unregister fails when there is nothing to
	// drop, as after the instance was re-created.
	_ = guest.Unregister("tool", cfg.ToolName)
	registered = false
	if err := guest.RegisterTool(toolFor(pr.InheritsParentContext), run); err != nil {
		return err
	}
	registered = true
	return nil
}

func onRemoved(_ guest.Context, payload []byte) error {
	pr, err := decodeEvent(payload)
	if err != nil || pr.Name != cfg.Provider {
		return err
	}
	// A re-created instance does not remember registering: try anyway.
	err = guest.Unregister("tool", cfg.ToolName)
	if !registered {
		err = nil
	}
	registered = false
	return err
}

const params = `{"type":"object","properties":{` +
	`"description":{"type":"string","description":"A short label of the task, three to six words, shown to the user."},` +
	`"prompt":{"type":"string","description":%q}},` +
	`"required":["description","prompt"],"additionalProperties":false}`

// toolFor words the tool for a provider that does or does not give the
// child the conversation so far.
func toolFor(inherits bool) guest.Tool {
	var desc, promptDesc string
	if inherits {
		desc = "Hand a self-contained piece of work to a forked child agent and get back its final answer. " +
			"The child INHERITS this conversation's completed turns: everything said and done before the current request. " +
			"It does not see the current turn, neither the latest user message nor what you did since. " +
			"Use it to explore or try something on the side without filling this conversation with the details. " +
			"Only the child's last message comes back, so ask it to end with what you need."
		promptDesc = "The task for the child. It already knows the earlier turns, so state only what is new: the part of the current request it should do and what to report."
	} else {
		desc = "Hand a self-contained piece of work to a fresh child agent and get back its final answer. " +
			"The child starts from nothing: it does not see this conversation, your files read so far or your plan. " +
			"Use it for work that can be described completely in one message, such as a search, a review or a focused change. " +
			"Only the child's last message comes back, so ask it to end with what you need."
		promptDesc = "The complete, standalone task for the child: what to do, every fact, path and constraint it needs, and what to report at the end. It knows nothing else."
	}
	return guest.Tool{Name: cfg.ToolName, Description: desc, Parameters: json.RawMessage(fmt.Sprintf(params, promptDesc))}
}

type args struct {
	Description string `json:"description"`
	Prompt      string `json:"prompt"`
}

func run(_ guest.Context, raw []byte) (string, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", fmt.Errorf("%s: arguments: %w", cfg.ToolName, err)
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return "", fmt.Errorf("%s: prompt is empty: give the child its task", cfg.ToolName)
	}
	res, err := guest.RunSubagent(cfg.Provider, a.Description, a.Prompt)
	if err != nil {
		return "", err
	}
	if res.StopReason != "completed" {
		msg := fmt.Sprintf("the child agent did not complete: it stopped with %q", res.StopReason)
		if res.Text != "" {
			msg += "; its last message:\n" + res.Text
		}
		return "", errors.New(msg)
	}
	return res.Text, nil
}
