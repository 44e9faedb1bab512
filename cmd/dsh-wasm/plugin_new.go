package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/examples/plugins"
	"github.com/spf13/cobra"
)

// sdkModule is the Go module a Go plugin requires for the guest SDK.
const sdkModule = "github.com/dsh-wasm/dsh-wasm"

var validNewName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

func newPluginNewCmd(s streams) *cobra.Command {
	var lang, dir, sdk string
	cmd := &cobra.Command{
		Use:   "new --lang go|c|rust|as [--dir DIR] [--sdk DIR] NAME",
		Short: "Write a new plugin with a section, a variable and a tool, and its build script",
		Long: `New writes a working plugin in language --lang to DIR (default ./NAME),
copied from the author kit of examples/plugins/<lang> with its names
prefixed by NAME: a section NAME:hello (or NAME:greet), a variable
NAME_greeting used in it, and a tool. Build it with DIR/build.sh, then try
it with dsh-wasm plugin inspect --render and dsh-wasm plugin call.

NAME must match [a-z][a-z0-9_]{0,30}: it prefixes the plugin's section,
variable and tool names, which are global across the plugins an agent
loads.

Toolchains: go needs the Go version the SDK's go.mod names; c needs clang, lld, wasi-libc and
libclang-rt-dev-wasm32; rust needs rustc with the wasm32 WASI standard
library (Debian: rustc and libstd-rust-dev-wasm32); as needs node and npm
(run npm ci in DIR first).

The Go SDK is not published as a module yet: a Go plugin's go.mod requires
` + sdkModule + ` and replaces it with a checkout, given with --sdk or
found above the current directory.

Exit status: 0 written; 1 DIR exists or cannot be written, or no SDK for
go; 2 usage.`,
		Example: `  dsh-wasm plugin new --lang c weather && weather/build.sh
  dsh-wasm plugin call weather/weather.wasm weather_reverse '{"text":"abc"}'`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !validNewName.MatchString(name) {
				return usagef("NAME %q: want [a-z][a-z0-9_]{0,30}", name)
			}
			renames, ok := plugins.Renames[lang]
			if !ok {
				return usagef("--lang %q: want go, c, rust or as", lang)
			}
			if dir == "" {
				dir = name
			}
			var gomod string
			if lang == "go" {
				if sdk == "" {
					sdk = findSDK()
				}
				if sdk == "" {
					return fmt.Errorf("the Go SDK (%s) is not published as a module yet: pass --sdk DIR, a checkout of dsh-wasm, to replace it with", sdkModule)
				}
				abs, err := filepath.Abs(sdk)
				if err != nil {
					return err
				}
				gomod = fmt.Sprintf("module example.com/%s\n\ngo %s\n\nrequire %s v0.0.0\n\n// The SDK is not published yet; build against a checkout.\nreplace %s => %s\n", name, goVersion(abs), sdkModule, sdkModule, abs)
			}
			if err := writeScaffold(lang, name, dir, renames, gomod); err != nil {
				return err
			}
			tool := name + "_" + plugins.Tools[lang][0]
			fmt.Fprintf(s.out, "wrote %s (%s): build it with %s\nthen: dsh-wasm plugin call %s %s '%s'\n",
				dir, lang, filepath.Join(dir, "build.sh"), filepath.Join(dir, name+".wasm"), tool, plugins.Tools[lang][1])
			return nil
		},
	}
	cmd.Flags().StringVar(&lang, "lang", "", "the plugin's language: go, c, rust or as")
	cmd.Flags().StringVar(&dir, "dir", "", "write the plugin to `DIR` (default ./NAME); it must not exist")
	cmd.Flags().StringVar(&sdk, "sdk", "", "a checkout of dsh-wasm for a Go plugin's go.mod `DIR` (default: found above the current directory)")
	return cmd
}

// writeScaffold copies the kit of lang to dir, renaming its names.
func writeScaffold(lang, name, dir string, renames [][2]string, gomod string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists; choose another --dir", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, err := fs.ReadDir(plugins.Kits, lang)
	if err != nil {
		return err
	}
	pairs := make([]string, 0, 2*len(renames))
	for _, r := range renames {
		pairs = append(pairs, r[0], strings.ReplaceAll(r[1], "NAME", name))
	}
	rep := strings.NewReplacer(pairs...)
	for _, f := range files {
		b, err := fs.ReadFile(plugins.Kits, path.Join(lang, f.Name()))
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(f.Name(), ".sh") {
			mode = 0o755
		}
		text := string(b)
		if f.Name() != "dsh.h" && f.Name() != "dsh.ts" && f.Name() != "package-lock.json" {
			text = rep.Replace(text)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), []byte(text), mode); err != nil {
			return err
		}
	}
	if gomod != "" {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// goVersion is the go directive of the SDK checkout's go.mod, which a
// module requiring it must not undercut.
func goVersion(sdk string) string {
	b, err := os.ReadFile(filepath.Join(sdk, "go.mod"))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
				return v
			}
		}
	}
	return "1.24"
}

// findSDK returns the dsh-wasm checkout above the current directory, if any.
func findSDK() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			first := ""
			if sc.Scan() {
				first = strings.TrimSpace(sc.Text())
			}
			f.Close()
			if first == "module "+sdkModule {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
