package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/template"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// renderRows renders 1, 10 and 100 MB templates with the prompt package's
// strict renderer and with text/template (parsed once, as a program would
// keep it), each a run of text with a variable every 4 KiB.
func renderRows(c bconfig) ([]*row, error) {
	var rows []*row
	for i, mb := range c.renderMB {
		chunk := strings.Repeat("x", 4096-len("{{model}}")) + "{{model}}"
		n := mb << 20 / len(chunk)
		ours := strings.Repeat(chunk, n)
		theirs := strings.ReplaceAll(ours, "{{model}}", "{{.model}}")
		vars := map[string]prompt.Value{"model": {Text: "deepseek-v4-flash", OK: true}}
		tvars := map[string]string{"model": "deepseek-v4-flash"}
		want := len(ours) + n*(len("deepseek-v4-flash")-len("{{model}}"))
		tpl, err := template.New("t").Option("missingkey=error").Parse(theirs)
		if err != nil {
			return nil, err
		}
		group := fmt.Sprintf("render %d MB (a variable every 4 KiB)", mb)
		base := &row{group: group, name: "text/template (parsed once)", unit: "time"}
		r := &row{group: group, name: "prompt.RenderText (strict)", unit: "time", base: base.name}
		var sb strings.Builder
		d, cpu, err := sample(c.render[i], func() error {
			sb.Reset()
			sb.Grow(want)
			if err := tpl.Execute(&sb, tvars); err != nil {
				return err
			}
			if sb.Len() != want {
				return fmt.Errorf("text/template rendered %d bytes, want %d", sb.Len(), want)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		base.samples, base.cpu = durs(d), float64(cpu)
		sb = strings.Builder{}
		d, cpu, err = sample(c.render[i], func() error {
			out, err := prompt.RenderText("bench", ours, vars)
			if err != nil {
				return err
			}
			if len(out) != want {
				return fmt.Errorf("RenderText rendered %d bytes, want %d", len(out), want)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		r.samples, r.cpu = durs(d), float64(cpu)
		rows = append(rows, base, r)
	}
	return rows, nil
}

var _ = io.Discard
