// Command embedder is the smallest embedder the measures build: one
// deployment, one Wasm plugin of its own (a file named on the command
// line), no built-in plugin. Its size is what an embedder who loads only
// its own plugins ships.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: embedder PLUGIN.wasm")
		os.Exit(2)
	}
	ctx := context.Background()
	d, err := deploy.New(ctx, deploy.Options{Model: "m", Plugins: []deploy.PluginSpec{{Source: os.Args[1]}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer d.Close(ctx)
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: "."})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer s.Close(ctx)
	res, err := s.Prompt(ctx, "hello")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(res.Text)
}
