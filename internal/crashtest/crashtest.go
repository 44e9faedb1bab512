// Package crashtest runs a test's helper in a child process and kills it
// with SIGKILL at a moment the helper chooses, for tests of what a crash
// leaves on disk.
package crashtest

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// readyLine is what the helper prints when it is ready to be killed.
const readyLine = "ready"

// readyTimeout bounds the wait for the helper on a loaded machine.
const readyTimeout = 30 * time.Second

// Ready tells the parent to kill this process now. The helper then keeps
// doing what it does (a hanging stream, a sleep) until the kill arrives.
func Ready() { os.Stdout.WriteString("\n" + readyLine + "\n") }

// KillWhenReady runs the test function helper of the current test binary
// in a child process with env added to its environment, waits until it
// calls Ready, and kills it with SIGKILL. It fails t if the helper ends or
// takes readyTimeout without calling Ready.
func KillWhenReady(t testing.TB, helper string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == readyLine {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatalf("%s ended before it was ready", helper)
		}
	case <-time.After(readyTimeout):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%s was not ready after %v", helper, readyTimeout)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
}
