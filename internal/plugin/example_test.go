package plugin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// A host serves the built-in plugins of package guests when given their
// file system; Load runs the plugin's dsh_init and commits what it
// registered into the host's registry.
func ExampleHost_Load() {
	ctx := context.Background()
	h, err := plugin.New(plugin.Options{
		Registry: prompt.NewRegistry(nil),
		Builtins: guests.All(),
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)

	p, err := h.Load(ctx, plugin.Spec{
		Source: "builtin:facts",
		Config: json.RawMessage(`{"platform":"plan9/arm"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Name(), p.ABI())
	fmt.Println("variables:", p.Contribution().Variables)
	fmt.Println("loaded:", h.Plugins())
	// Output:
	// facts dsh
	// variables: [date platform]
	// loaded: [facts]
}

// A module can also be loaded from a file, with its digest pinned: a
// module whose bytes differ is refused before it is compiled.
func ExampleSpec_file() {
	ctx := context.Background()
	wasm, err := fs.ReadFile(guests.All(), "facts.wasm")
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "plugin-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "facts.wasm")
	if err := os.WriteFile(path, wasm, 0o644); err != nil {
		log.Fatal(err)
	}
	sum := sha256.Sum256(wasm)

	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	p, err := h.Load(ctx, plugin.Spec{Name: "pinned", Source: path, SHA256: "sha256:" + hex.EncodeToString(sum[:])})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("loaded", p.Name())

	var wrong [32]byte
	_, err = h.Load(ctx, plugin.Spec{Name: "other", Source: path, SHA256: hex.EncodeToString(wrong[:])})
	fmt.Println("wrong digest refused:", errors.Is(err, plugin.ErrDigestMismatch))
	// Output:
	// loaded pinned
	// wrong digest refused: true
}

// A plugin's variables are resolved when the registry assembles a prompt
// for an agent: here a section of the embedding program references the
// facts plugin's platform variable.
func ExampleHost_Registry() {
	ctx := context.Background()
	reg := prompt.NewRegistry(nil)
	h, err := plugin.New(plugin.Options{Registry: reg, Builtins: guests.All(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	if _, err := h.Load(ctx, plugin.Spec{Source: "builtin:facts", Config: json.RawMessage(`{"platform":"plan9/arm"}`)}); err != nil {
		log.Fatal(err)
	}
	if _, err := reg.RegisterSection(prompt.Section{Name: "environment", Order: 10, Text: "You run on {{platform}}."}); err != nil {
		log.Fatal(err)
	}

	agent := &prompt.AgentFacts{ID: "a1", Session: "s1", Model: "m"}
	a, err := h.Registry().Assemble(ctx, prompt.AssembleContext{Agent: agent})
	if err != nil {
		log.Fatal(err)
	}
	text, err := prompt.Render(a)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(text)
	h.EndAgent(ctx, agent.ID)
	// Output:
	// You run on plan9/arm.
}

// CallTool runs a tool in the calling agent's own instance of the plugin
// that registered it. builtin:tool-fs reads files only inside the roots
// its grants give it; "workspace" is the agent's working directory.
func ExampleHost_CallTool() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "plugin-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("first\nsecond\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: guests.All(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	spec, err := plugin.SpecFromEntry("", config.Entry{
		Source: "builtin:tool-fs",
		Grants: config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRO}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := h.Load(ctx, spec); err != nil {
		log.Fatal(err)
	}

	agent := &prompt.AgentFacts{ID: "a1", Session: "s1", Model: "m", Cwd: dir}
	defer h.EndAgent(ctx, agent.ID) // closes the agent's instances
	r, err := h.CallTool(ctx, agent, "read", []byte(`{"file_path":"notes.txt"}`))
	if err != nil {
		log.Fatal(err)
	}
	// The result names the file by its absolute path.
	fmt.Printf("error: %v\n%s\n", r.IsError, strings.ReplaceAll(r.Text, dir, "DIR"))

	_, err = h.CallTool(ctx, agent, "no_such_tool", nil)
	fmt.Println("no such tool:", errors.Is(err, plugin.ErrNoTool))
	// Output:
	// error: false
	// <path>DIR/notes.txt</path>
	// <type>file</type>
	// <content>
	// 1: first
	// 2: second
	//
	// (End of file - total 2 lines)
	// </content>
	// no such tool: true
}

// A plugin that declares needs (builtin:tool-fs reads the workspace) is
// refused unless its grants cover them. SpecFromEntry turns a config
// entry, as a deployment file holds it, into a Spec with those grants.
func ExampleSpecFromEntry() {
	ctx := context.Background()
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: guests.All(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)

	_, err = h.Load(ctx, plugin.Spec{Source: "builtin:tool-fs"})
	fmt.Println("without grants:", errors.Is(err, plugin.ErrNotGranted))

	spec, err := plugin.SpecFromEntry("files", config.Entry{
		Source: "builtin:tool-fs",
		Grants: config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := h.Load(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("with grants:", p.Name(), p.Capabilities().FS)
	// Output:
	// without grants: true
	// with grants: files [{workspace ro}]
}

// Reload swaps a plugin for a new load of it (here with another config)
// in one registry update; Unload takes its contribution away.
func ExampleHost_Reload() {
	ctx := context.Background()
	reg := prompt.NewRegistry(nil)
	h, err := plugin.New(plugin.Options{Registry: reg, Builtins: guests.All(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	platform := func() string {
		a, err := reg.Assemble(ctx, prompt.AssembleContext{})
		if err != nil {
			log.Fatal(err)
		}
		return a.Variables["platform"].Text
	}

	spec := plugin.Spec{Source: "builtin:facts", Config: json.RawMessage(`{"platform":"plan9/arm"}`)}
	if _, err := h.Load(ctx, spec); err != nil {
		log.Fatal(err)
	}
	fmt.Println(platform())

	spec.Config = json.RawMessage(`{"platform":"plan9/386"}`)
	if _, err := h.Reload(ctx, spec); err != nil {
		log.Fatal(err)
	}
	fmt.Println(platform())

	if err := h.Unload(ctx, "facts"); err != nil {
		log.Fatal(err)
	}
	_, vars, _ := reg.Names()
	fmt.Println(h.Plugins(), vars)
	// Output:
	// plan9/arm
	// plan9/386
	// [] []
}

func init() {
	// The examples leave Options.Cache nil, as an embedder would: compile
	// into the tests' shared cache rather than the user's.
	if os.Getenv(plugin.EnvCacheDir) == "" {
		if dir, err := guestbuild.CacheDir(); err == nil {
			os.Setenv(plugin.EnvCacheDir, filepath.Join(dir, "wazero"))
		}
	}
}
