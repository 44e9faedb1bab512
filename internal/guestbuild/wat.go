package guestbuild

import (
	"errors"
	"fmt"
	"os/exec"
)

// ErrNoWat2Wasm: a .wat test module cannot be built because wat2wasm is
// not installed (Debian: apt-get install wabt).
var ErrNoWat2Wasm = errors.New("guestbuild: wat2wasm is needed to build .wat test modules (apt-get install wabt)")

// CompileWat assembles the text module src into out with wat2wasm.
func CompileWat(out, src string) error {
	w, err := exec.LookPath("wat2wasm")
	if err != nil {
		return ErrNoWat2Wasm
	}
	if b, err := exec.Command(w, src, "-o", out).CombinedOutput(); err != nil {
		return fmt.Errorf("guestbuild: wat2wasm %s: %v\n%s", src, err, b)
	}
	return nil
}
