//go:build !wasip1

package guest

import "github.com/dsh-wasm/dsh-wasm/hostfns"

// hostCall outside Wasm: there is no host to call. Tests replace it.
var hostCall = func(fn string, in []byte) (hostfns.Status, []byte) {
	return hostfns.ErrInternal, []byte(ErrNotHosted.Error())
}
