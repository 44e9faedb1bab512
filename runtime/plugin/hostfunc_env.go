package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/abi/dsh"
)

// hostEnvGet implements env_get: a host environment variable the plugin
// is granted (grants.env).
func hostEnvGet(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.NameRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if !slices.Contains(in.p.grants().Env, r.Name) || r.Name == "" {
		return nil, hostfns.ErrDenied, fmt.Sprintf("environment variable %q is not granted to plugin %q (grants.env)", r.Name, in.p.name)
	}
	v, ok := os.LookupEnv(r.Name)
	b, _ := json.Marshal(hostfns.EnvGetResponse{Found: ok, Value: v})
	return b, 0, ""
}
