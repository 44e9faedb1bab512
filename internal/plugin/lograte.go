package plugin

import (
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/budget"
)

// logWindow is the period of Limits.LogBytes.
const logWindow = time.Minute

// logRate bounds what one plugin logs (log records and stdio lines) to
// Limits.LogBytes per minute, so that a plugin cannot fill the host's
// logs or spend its time writing them. Past the bound, records are dropped
// until the minute ends; one warning says so, and the next minute's first
// record is preceded by a count of what was dropped.
type logRate struct {
	mu      sync.Mutex
	started bool
	start   time.Duration // monotime at the window's start
	used    int64
	dropped int64 // records dropped in the current window
	now     func() time.Duration
}

// allow reports whether n more bytes may be logged now. notice, when
// non-empty, is a warning to log first (it does not count).
func (r *logRate) allow(limit int64, n int) (ok bool, notice string, dropped int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// One read of the monotonic clock: the window needs no wall time.
	var now time.Duration
	if r.now != nil {
		now = r.now()
	} else {
		now = budget.Monotime()
	}
	if !r.started || now-r.start >= logWindow {
		dropped = r.dropped
		r.started, r.start, r.used, r.dropped = true, now, 0, 0
		if dropped > 0 {
			notice = "log records were dropped: the plugin passed grants.limits.log_bytes in the last minute"
		}
	}
	if r.used+int64(n) > limit {
		if r.dropped == 0 {
			notice = "log rate limit reached (grants.limits.log_bytes per minute): the plugin's log records are dropped until the minute ends"
		}
		r.dropped++
		return false, notice, dropped
	}
	r.used += int64(n)
	return true, notice, dropped
}

// logf logs msg for the plugin if its rate allows.
func (p *Plugin) rateLog(n int, log func()) {
	ok, notice, dropped := p.logs.allow(p.limits.LogBytes, n)
	if notice != "" {
		if dropped > 0 {
			p.log.Warn(notice, "dropped", dropped)
		} else {
			p.log.Warn(notice, "limit", p.limits.LogBytes)
		}
	}
	if ok {
		log()
	}
}
