package main

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// The program runs offline: the Wasm tool reads the file from the
// workspace it was granted, the native tool counts, the agent answers.
func TestEmbedRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, false); err != nil {
		t.Fatal(err)
	}
	want := "tool: read\ntool: word_count\nturn 1 ended completed after 3 steps\nmotto.txt has 7 words.\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func Example() {
	if err := run(context.Background(), os.Stdout, false); err != nil {
		panic(err)
	}
	// Output:
	// tool: read
	// tool: word_count
	// turn 1 ended completed after 3 steps
	// motto.txt has 7 words.
}
