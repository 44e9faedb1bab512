//go:build unix

package guests

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestToolFSRefusesFIFO: a FIFO is refused before it is opened, which
// would wait for a writer forever (WASI reports it as type "unknown",
// which Go's wasip1 port takes for a regular file).
func TestToolFSRefusesFIFO(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), "", 0)
	if err := syscall.Mkfifo(filepath.Join(e.dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fails(t, "read", `{"file_path":"fifo"}`, `cannot read "fifo": not a regular file`)
	e.fails(t, "write", jsonArgs("file_path", "fifo", "content", "x"), `cannot write "fifo": not a regular file`)
	e.ok(t, "write", jsonArgs("file_path", "f.txt", "content", "x"))
	e.fails(t, "edit", jsonArgs("file_path", "fifo", "old_string", "a", "new_string", "b"), `edit requires reading "`+filepath.Join(e.dir, "fifo")+`" first`)
}
