//go:build !linux

package execjail

import (
	"errors"
	"os"
)

// errNotLinux: process isolation here relies on Linux PID namespaces,
// cgroups, Pdeathsig and waitid; other systems are not supported.
var errNotLinux = errors.New("execjail requires Linux")

func probe(Mode) error                        { return errNotLinux }
func bestMode() Mode                          { return "" }
func newTree(Mode, *limitGroup) (tree, error) { return nil, errNotLinux }
func signalName(*os.ProcessState) string      { return "" }
func onSpawnerThread(f func() error) error    { return f() }

const helperPath = ""

type helperConfig struct {
	ErrFD       int      `json:"err_fd"`
	CgroupProcs []string `json:"cgroup_procs,omitempty"`
	MountProc   bool     `json:"mount_proc,omitempty"`
	Hide        []string `json:"hide,omitempty"`
	Guard       []string `json:"guard,omitempty"`
	FileBytes   uint64   `json:"file_bytes,omitempty"`
	KeepCaps    bool     `json:"keep_caps,omitempty"`
	Scope       uint64   `json:"scope,omitempty"`
}

const helperArg0 = ""

type limitGroup struct{ v2 string }

func newLimitGroup(Limits) (*limitGroup, error) { return &limitGroup{}, nil }
func (*limitGroup) procsFiles() []string        { return nil }
func (*limitGroup) oomKills() uint64            { return 0 }
func (*limitGroup) remove()                     {}
func commandScope() uint64                      { return 0 }
func hardenAgent() error                        { return errNotLinux }

func enforcement(mode Mode, l Limits) Enforcement {
	e := Enforcement{Mode: mode, Processes: Bound{Limit: int64(l.Processes), Unenforced: errNotLinux.Error()},
		Memory: Bound{Limit: l.Memory, Unenforced: errNotLinux.Error()}, FileBytes: Bound{Limit: l.FileBytes, Unenforced: errNotLinux.Error()}}
	return e
}
