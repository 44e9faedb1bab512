package dsh

import (
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// hostCapabilities implements capabilities_declare: during dsh_init, the
// plugin declares what it needs (fs roots, exec, net, env, session
// events); the load then checks the needs against the grants.
func hostCapabilities(h Host, req []byte) ([]byte, hostfns.Status, string) {
	if !h.Call().Init {
		return nil, hostfns.ErrDenied, "capabilities can be declared only during dsh_init"
	}
	var c hostfns.Capabilities
	if st, msg := Decode(req, &c); st != 0 {
		return nil, st, msg
	}
	for _, f := range c.FS {
		if f.Mode != "ro" && f.Mode != "rw" {
			return nil, hostfns.ErrBadJSON, fmt.Sprintf("fs need %q: mode %q is not ro or rw", f.Path, f.Mode)
		}
		if f.Path != "workspace" && !strings.HasPrefix(f.Path, "/") {
			return nil, hostfns.ErrBadJSON, fmt.Sprintf("fs need %q: path must be \"workspace\" or absolute", f.Path)
		}
	}
	h.DeclareCapabilities(c)
	return nil, 0, ""
}
