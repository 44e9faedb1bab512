package deploy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// The built-in plugins are opt-in: without Options.Builtins a builtin:
// source fails, naming it; with only guests.ToolFS, tool-fs loads and
// another built-in fails, naming the ones there are.
func TestBuiltinsAreOptIn(t *testing.T) {
	ctx := context.Background()
	open := func(builtins *deploy.Options, source string) error {
		opts := deploy.Options{SessionsDir: t.TempDir(), Cache: deploytest.Cache(t),
			Plugins: []deploy.PluginSpec{{Source: source,
				Grants: &config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRO}}}}}}
		if builtins != nil {
			opts.Builtins = builtins.Builtins
		}
		d, err := deploy.New(ctx, opts)
		if err == nil {
			d.Close(ctx)
		}
		return err
	}
	err := open(nil, "builtin:tool-fs")
	if !errors.Is(err, plugin.ErrSource) || !strings.Contains(err.Error(), "builtin:tool-fs") || !strings.Contains(err.Error(), "no built-in plugins") {
		t.Errorf("builtin:tool-fs without Builtins: %v, want an ErrSource naming it", err)
	}
	only := &deploy.Options{Builtins: guests.ToolFS}
	if err := open(only, "builtin:tool-fs"); err != nil {
		t.Errorf("builtin:tool-fs with guests.ToolFS: %v", err)
	}
	err = open(only, "builtin:facts")
	if !errors.Is(err, plugin.ErrSource) || !strings.Contains(err.Error(), `no built-in plugin "facts" (have tool-fs)`) {
		t.Errorf("builtin:facts with guests.ToolFS only: %v", err)
	}
}
