// Package cputime reads the CPU time the process has used, for tests and
// benchmarks. A test that bounds how much work something did bounds its
// CPU time: unlike the wall clock, it does not grow when the machine is
// loaded and the process waits for a core.
package cputime

import "time"

// Process returns the user and system CPU time the process has used so
// far, and false where the platform cannot tell (then 0).
func Process() (time.Duration, bool) { return process() }
