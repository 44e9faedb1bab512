package guests

import (
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/cputime"
)

// cpuTime is the process's user and system CPU time so far (0 where the
// platform cannot tell).
func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}
