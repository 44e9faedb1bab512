package dsh

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// hostEnvGet implements env_get: a host environment variable the plugin
// is granted (grants.env).
func hostEnvGet(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.NameRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if !h.EnvGranted(r.Name) || r.Name == "" {
		return nil, hostfns.ErrDenied, fmt.Sprintf("environment variable %q is not granted to plugin %q (grants.env)", r.Name, h.Name())
	}
	v, ok := os.LookupEnv(r.Name)
	b, _ := json.Marshal(hostfns.EnvGetResponse{Found: ok, Value: v})
	return b, 0, ""
}
