//go:build !linux

package execjail

import (
	"errors"
	"os"
)

// errNotLinux: process isolation here relies on Linux PID namespaces,
// cgroups, Pdeathsig and waitid; other systems are not supported.
var errNotLinux = errors.New("execjail requires Linux")

func probe(Mode) error                     { return errNotLinux }
func bestMode() Mode                       { return "" }
func procMounter() string                  { return "" }
func newTree(Mode) (tree, error)           { return nil, errNotLinux }
func signalName(*os.ProcessState) string   { return "" }
func onSpawnerThread(f func() error) error { return f() }
