package main

import (
	"context"
	"fmt"
	"gopkg.in/yaml.v3"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

const exampleConfig = "examples/coding-agent/dsh.yml"

// startRows times process start to the first rendered prompt of the
// coding-agent example, cold (an empty compilation cache) and warm (the
// cache the previous run filled), against this binary producing a prompt
// of the same text from native Go sections.
func startRows(c bconfig) ([]*row, error) {
	group := "start to first prompt, examples/coding-agent"
	if _, err := os.Stat(exampleConfig); err != nil {
		return []*row{{group: group, name: "dsh-wasm prompt", na: "n/a: examples/coding-agent is not on this branch"}}, nil
	}
	tmp, err := os.MkdirTemp("", "dsh-bench-start-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin, err := dshBinary()
	if err != nil {
		return nil, err
	}
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return nil, err
	}
	promptOf := func(config, cacheDir string) (string, time.Duration, time.Duration, error) {
		cmd := exec.Command(bin, "prompt", "--config", config, "--cwd", work)
		cmd.Env = append(os.Environ(), "DSH_WASM_CACHE_DIR="+cacheDir)
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		out, err := cmd.Output()
		wall := time.Since(t0)
		if err != nil {
			return "", 0, 0, fmt.Errorf("dsh-wasm prompt: %w", err)
		}
		return string(out), wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
	}
	prompt := func(cacheDir string) (string, time.Duration, time.Duration, error) {
		return promptOf(exampleConfig, cacheDir)
	}
	warmDir := filepath.Join(tmp, "warm-cache")
	text, _, _, err := prompt(warmDir)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(text, "coding agent") {
		return nil, fmt.Errorf("dsh-wasm prompt printed %.200q", text)
	}
	promptFile := filepath.Join(tmp, "prompt.txt")
	if err := os.WriteFile(promptFile, []byte(text), 0o644); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	native := func() (time.Duration, time.Duration, error) {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), childEnv+"=native-prompt:"+promptFile+":"+work)
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		out, err := cmd.Output()
		wall := time.Since(t0)
		if err != nil {
			return 0, 0, fmt.Errorf("native prompt: %w", err)
		}
		// The native deployment adds the harness's own sections before
		// the copied text, so its prompt holds dsh-wasm's whole.
		if !strings.Contains(string(out), strings.TrimSuffix(text, "\n")) {
			return 0, 0, fmt.Errorf("the native prompt does not hold dsh-wasm's:\n%.300s\n%.300s", out, text)
		}
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
	}
	// The same text as the persona of a deployment with no plugins: the
	// dsh-wasm binary's own start (its package initialisation, the CLI,
	// the harness's sections) with native text in place of the plugins.
	nativeConfig := filepath.Join(tmp, "native.yml")
	persona, _ := strings.CutPrefix(text, identityOf(text))
	cfgYAML, err := yamlConfig(persona)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(nativeConfig, cfgYAML, 0o644); err != nil {
		return nil, err
	}
	base := &row{group: group, name: "native Go stand-ins, same prompt", unit: "time"}
	cli := &row{group: group, name: "dsh-wasm prompt, no plugins, their text as the persona", unit: "time", base: base.name}
	warm := &row{group: group, name: "dsh-wasm prompt, warm cache", unit: "time", base: base.name}
	warmCLI := &row{group: group, name: "dsh-wasm prompt, warm cache, against the same binary", unit: "time", base: cli.name}
	eager := &row{group: group, name: "dsh-wasm prompt, warm cache without manifests", unit: "time", base: base.name}
	cold := &row{group: group, name: "dsh-wasm prompt, cold (empty cache)", unit: "time", base: base.name}
	var bc, lc, wc, ec, cc time.Duration
	for i := range c.process {
		w, cpu, err := native()
		if err != nil {
			return nil, err
		}
		base.samples, bc = append(base.samples, float64(w)), bc+cpu
		out, w, cpu, err := promptOf(nativeConfig, filepath.Join(tmp, "native-cache"))
		if err != nil {
			return nil, err
		}
		if out != text {
			return nil, fmt.Errorf("the no-plugin prompt differs from the example's:\n%.300s\n%.300s", out, text)
		}
		cli.samples, lc = append(cli.samples, float64(w)), lc+cpu
		out, w, cpu, err = prompt(warmDir)
		if err != nil {
			return nil, err
		}
		if out != text {
			return nil, fmt.Errorf("warm prompt differs from the first")
		}
		warm.samples, wc = append(warm.samples, float64(w)), wc+cpu
		// Without manifests, every plugin is compiled from the cache (and
		// its manifest written again), as before lazy loads.
		if err := os.RemoveAll(filepath.Join(warmDir, "manifests")); err != nil {
			return nil, err
		}
		out, w, cpu, err = prompt(warmDir)
		if err != nil {
			return nil, err
		}
		if out != text {
			return nil, fmt.Errorf("warm prompt without manifests differs from the first")
		}
		eager.samples, ec = append(eager.samples, float64(w)), ec+cpu
		out, w, cpu, err = prompt(filepath.Join(tmp, fmt.Sprintf("cold-%d", i)))
		if err != nil {
			return nil, err
		}
		if out != text {
			return nil, fmt.Errorf("cold prompt differs from the warm one")
		}
		cold.samples, cc = append(cold.samples, float64(w)), cc+cpu
	}
	n := time.Duration(c.process)
	base.cpu, cli.cpu, warm.cpu, eager.cpu, cold.cpu = float64(bc/n), float64(lc/n), float64(wc/n), float64(ec/n), float64(cc/n)
	warmCLI.samples, warmCLI.cpu = warm.samples, warm.cpu
	return []*row{base, cli, warm, warmCLI, eager, cold}, nil
}

// identityOf is the harness's identity section at the head of a prompt:
// its first paragraph, which a deployment adds whatever its persona.
func identityOf(text string) string {
	if i := strings.Index(text, "\n\n"); i >= 0 {
		return text[:i+2]
	}
	return ""
}

// yamlConfig is a deployment with the example's model, no plugins, and
// persona as its persona, verbatim.
func yamlConfig(persona string) ([]byte, error) {
	return yaml.Marshal(map[string]any{"model": "deepseek-v4-flash", "persona": strings.TrimSuffix(persona, "\n")})
}

// nativePrompt is the baseline child: a deployment with no plugins whose
// one native section holds the text dsh-wasm's plugins and harness
// rendered, printed as dsh-wasm prompt prints it. It pays the same
// process start, registry, assembly and rendering, without Wasm.
func nativePrompt(arg string) int {
	file, cwd, ok := strings.Cut(arg, ":")
	if !ok {
		fmt.Fprintln(os.Stderr, "native-prompt: want FILE:CWD")
		return 2
	}
	text, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "native-prompt:", err)
		return 1
	}
	ctx := context.Background()
	body := strings.TrimSuffix(string(text), "\n")
	d, err := deploy.New(ctx, deploy.Options{Model: "deepseek-v4-flash", SessionsDir: os.TempDir(),
		Sections: []prompt.Section{{Name: "native:all", Order: 500, Dynamic: func(ctx context.Context, a prompt.AssembleContext) (string, error) {
			return body, nil
		}}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "native-prompt:", err)
		return 1
	}
	defer d.Close(ctx)
	p, err := d.SystemPrompt(ctx, deploy.PromptOptions{Cwd: cwd})
	if err != nil {
		fmt.Fprintln(os.Stderr, "native-prompt:", err)
		return 1
	}
	fmt.Print(p.System)
	return 0
}

var dshBin string

// dshBinary builds cmd/dsh-wasm once per run, into a temporary directory
// the process leaves behind in $TMPDIR (it is small and reused by the
// rows that start it).
func dshBinary() (string, error) {
	if dshBin != "" {
		return dshBin, nil
	}
	dir, err := os.MkdirTemp("", "dsh-bench-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "dsh-wasm")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dsh-wasm")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build dsh-wasm: %w", err)
	}
	dshBin = bin
	return bin, nil
}
