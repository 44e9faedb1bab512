package cputime

import (
	"testing"
	"time"
)

// Spinning uses CPU time; sleeping does not.
func TestProcess(t *testing.T) {
	start, ok := Process()
	if !ok {
		t.Skip("no process CPU time on this platform")
	}
	time.Sleep(200 * time.Millisecond)
	slept, _ := Process()
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	spun, _ := Process()
	if slept-start > 100*time.Millisecond {
		t.Errorf("a 200 ms sleep used %v of CPU", slept-start)
	}
	if spun <= slept {
		t.Errorf("a 50 ms spin used no CPU time (%v, then %v)", slept, spun)
	}
}
