//go:build wasip1

// Command hello is a minimal dsh-wasm plugin: a section, a variable and a
// tool.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

func main() {} // required by the Go toolchain, never called

func init() {
	guest.Main(func(p *guest.Plugin) error {
		var cfg struct {
			Greeting string `json:"greeting"`
		}
		if err := json.Unmarshal(p.Config, &cfg); err != nil {
			return fmt.Errorf("hello config: %w", err)
		}
		if cfg.Greeting == "" {
			cfg.Greeting = "Hello"
		}
		if err := p.Section("hello:greet", 150, "Greet people with the greet tool, never by hand; it says {{greeting}}."); err != nil {
			return err
		}
		if err := p.Variable("greeting", func(guest.Context) (string, bool, error) {
			return cfg.Greeting, true, nil
		}); err != nil {
			return err
		}
		return p.ToolArgs(guest.Tool{
			Name:        "greet",
			Description: "Greet someone by name.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		}, greet(cfg.Greeting))
	})
}

func greet(greeting string) guest.ArgsToolFunc {
	return func(ctx guest.Context, args *guest.Args, out *guest.Result) error {
		name, err := args.String("name")
		if err != nil {
			return err // `argument "name": missing argument`: an error result for the model
		}
		var n int // greetings so far in this session, kept by the host
		if _, err := guest.StateGet("count", &n); err != nil {
			return err
		}
		n++
		if err := guest.StateSet("count", n); err != nil {
			return err
		}
		guest.Log("debug", fmt.Sprintf("greeting #%d", n))
		fmt.Fprintf(out, "%s, %s! (greeting #%d)", greeting, name, n)
		return nil
	}
}
