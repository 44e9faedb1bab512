package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestQuickRows runs two sections as -quick does (the render and the
// agent loop against the fake model server) and checks that their rows
// carry samples and print with a ratio to their same-run baseline.
func TestQuickRows(t *testing.T) {
	if err := chdirModuleRoot(); err != nil {
		t.Fatal(err)
	}
	c := quickConfig()
	c.renderMB, c.sessions, c.log = []int{1}, 4, io.Discard
	var rows []*row
	for _, f := range []func(bconfig) ([]*row, error){renderRows, loopRows} {
		r, err := f(c)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	names := map[string]bool{}
	for _, r := range rows {
		names[r.name] = true
		if r.na != "" || len(r.samples) == 0 {
			t.Errorf("%s / %s: no samples (%s)", r.group, r.name, r.na)
		}
	}
	for _, want := range []string{"text/template (parsed once)", "prompt.RenderText (strict)", "turns per second", "loop overhead (turn minus model time)"} {
		if !names[want] {
			t.Errorf("no row %q", want)
		}
	}
	for _, r := range rows {
		if r.name == "turn wall time (model included)" && len(r.samples) != 4 {
			t.Errorf("%d turns timed, want 4", len(r.samples))
		}
	}
	var b bytes.Buffer
	printTable(&b, rows)
	out := b.String()
	if !strings.Contains(out, "x text/template (parsed once)") || !strings.Contains(out, "render 1 MB") {
		t.Errorf("the table lacks the render ratio:\n%s", out)
	}
}

// TestTableRatios checks the arithmetic of the printed table: medians,
// p99 and the ratio to the row named as baseline.
func TestTableRatios(t *testing.T) {
	base := &row{group: "g", name: "base", unit: "time", samples: []float64{1000, 3000, 2000}}
	r := &row{group: "g", name: "ours", unit: "time", base: "base", samples: []float64{4000, 5000, 6000, 7000, 100000}}
	na := &row{group: "g", name: "later", na: "n/a: not yet"}
	var b bytes.Buffer
	printTable(&b, []*row{base, r, na})
	out := b.String()
	for _, want := range []string{"2.00 µs", "6.00 µs", "100.00 µs", "3.00x base", "n/a: not yet"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if got := pct([]float64{5, 1, 4, 2, 3}, 50); got != 3 {
		t.Errorf("median = %v, want 3", got)
	}
}
