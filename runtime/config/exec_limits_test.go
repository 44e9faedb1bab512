package config

import (
	"errors"
	"strings"
	"testing"
)

func TestExecLimits(t *testing.T) {
	e, err := Load(file, []byte("source: x.wasm\n"))
	if err != nil {
		t.Fatal(err)
	}
	if x := e.Grants.Exec; x.MaxProcesses != DefaultExecProcesses || x.Memory != DefaultExecMemory || x.FileBytes != DefaultExecFileBytes {
		t.Errorf("exec limit defaults not applied: %+v", x)
	}
	e, err = Load(file, []byte("source: x.wasm\ngrants: {exec: {allowed: true, max_processes: 64, memory: 64MiB, file_bytes: 1MiB}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if x := e.Grants.Exec; x.MaxProcesses != 64 || x.Memory != 64*MiB || x.FileBytes != MiB {
		t.Errorf("exec limits = %+v", x)
	}
	for _, c := range []struct{ yaml, want string }{
		{"max_processes: 0", "grants.exec.max_processes: 0: want a whole number from 1 to 65536"},
		{"max_processes: 100000", "grants.exec.max_processes: 100000: want a whole number from 1 to 65536"},
		{"max_processes: many", "grants.exec.max_processes: want a whole number, got"},
		{"memory: 1MiB", "grants.exec.memory: 1048576 bytes: must be at least 4194304"},
		{"file_bytes: 0", "grants.exec.file_bytes: 0 bytes: must be at least 1"},
	} {
		_, err := Load(file, []byte("source: x.wasm\ngrants:\n  exec:\n    "+c.yaml+"\n"))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.yaml, err, c.want)
		}
	}
	bad := Entry{Source: "builtin:x", Grants: Grants{Exec: ExecGrant{MaxProcesses: -1, Memory: MiB, FileBytes: MaxFileBytes + 1}}}
	err = bad.Validate()
	for _, field := range []string{"grants.exec.max_processes:", "grants.exec.memory:", "grants.exec.file_bytes:"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate error lacks %q: %v", field, err)
		}
	}
}
