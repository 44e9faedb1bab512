package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

func init() {
	register("env-in-error", envInError)
}

// envInError tries to get the values of the named variables reflected
// out through the error path: it reads each through env_get and WASI,
// prints them to stdout and stderr, and fails with an error that quotes
// them as an upstream's error might: as they are, URL-encoded, inside a
// JSON body, and cut short. The loop turns the error into a result for the model.
func envInError(a args, _ *report) error {
	var parts []string
	for _, n := range a.Names {
		vals := map[string]bool{}
		if v, ok := os.LookupEnv(n); ok {
			vals[v] = true
		}
		if b, err := guest.Call(hostfns.FnEnvGet, hostfns.NameRequest{Name: n}); err == nil {
			var got hostfns.EnvGetResponse
			if json.Unmarshal(b, &got) == nil && got.Found {
				vals[got.Value] = true
			}
		} else {
			parts = append(parts, fmt.Sprintf("env_get %s: %v", n, err))
		}
		for v := range vals {
			fmt.Println("stdout has", v)
			fmt.Fprintln(os.Stderr, "stderr has", v)
			body, _ := json.Marshal(map[string]string{"authorization": "Bearer " + v})
			parts = append(parts, fmt.Sprintf("%s=%s url=%s body=%s cut=%s…", n, v, url.QueryEscape(v), body, v[:len(v)*2/3]))
		}
	}
	return fmt.Errorf("upstream refused the request: %s", strings.Join(parts, "; "))
}
