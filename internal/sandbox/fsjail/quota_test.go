//go:build unix

package fsjail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

const guestEIO = "I/O error"

// quotaJail mounts a fresh directory read-write at /work under q.
func quotaJail(t *testing.T, q *Quota) (dir string, j *Jail, work experimentalsys.FS) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, dir, "hello.txt", helloContent, 0o644)
	j, err := New([]Mount{{HostPath: dir, GuestPath: "/work"}}, WithQuota(q))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	work, _ = j.FS("/work")
	return dir, j, work
}

func hostSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func wantGuest(t *testing.T, results []string, raw string, wants ...string) {
	t.Helper()
	for i, want := range wants {
		if !strings.HasPrefix(results[i], want) {
			t.Errorf("guest command %d: %q, want %q…\n%s", i, results[i], want, raw)
		}
	}
}

// TestQuotaSparseThroughWASI: a 1 TiB sparse file, by pwrite at a huge
// offset or by truncate, costs its size and is refused; small ones work.
func TestQuotaSparseThroughWASI(t *testing.T) {
	q := NewQuota(1<<20, 100)
	dir, j, _ := quotaJail(t, q)
	results, raw := runGuest(t, j.FSConfig(), []string{
		"pwrite|/work/sparse|1099511627776|x",
		"truncate-to|/work/hello.txt|1099511627776",
		"pwrite|/work/sparse|1048576|x", // one byte past the quota's end
		"pwrite|/work/small|1000|x",     // the controls
		"truncate-to|/work/hello.txt|4096",
	})
	wantGuest(t, results, raw, "ERR ", "ERR ", "ERR ", "OK", "OK")
	for i := range 3 {
		if !strings.Contains(results[i], guestEIO) {
			t.Errorf("guest command %d: %q, want %q", i, results[i], guestEIO)
		}
	}
	if got := hostSize(t, filepath.Join(dir, "sparse")); got != 0 {
		t.Errorf("sparse is %d bytes on the host, want 0", got)
	}
	if got := hostSize(t, filepath.Join(dir, "hello.txt")); got != 4096 {
		t.Errorf("hello.txt is %d bytes on the host, want 4096", got)
	}
	bytes, files := q.Used()
	if want := int64(1001 + 4096 - len(helloContent)); bytes != want || files != 2 {
		t.Errorf("quota used %d bytes, %d files; want %d, 2", bytes, files, want)
	}
}

// TestQuotaWritesCutAtTheLimit: a stream of writes stops at the quota with
// EIO, having written exactly what fit.
func TestQuotaWritesCutAtTheLimit(t *testing.T) {
	q := NewQuota(3<<20+123, 100)
	dir, j, _ := quotaJail(t, q)
	results, raw := runGuest(t, j.FSConfig(), []string{"write-size|/work/big|8388608", "write-size|/work/more|10"})
	wantGuest(t, results, raw, "ERR ", "ERR ")
	if got := hostSize(t, filepath.Join(dir, "big")); got != 3<<20+123 {
		t.Errorf("big is %d bytes on the host, want %d", got, 3<<20+123)
	}
	if got := hostSize(t, filepath.Join(dir, "more")); got != 0 {
		t.Errorf("more is %d bytes, want 0", got)
	}
}

// TestQuotaFileCount: creating thousands of files stops at disk_files;
// mkdir, symlink and link count as well.
func TestQuotaFileCount(t *testing.T) {
	q := NewQuota(1<<30, 50)
	dir, j, work := quotaJail(t, q)
	wantErrno(t, "mkdir d", work.Mkdir("d", 0o755), 0)
	results, raw := runGuest(t, j.FSConfig(), []string{"create-many|/work/d|5000", "write|/work/d/f0|rewrite is free"})
	wantGuest(t, results, raw, "ERR ", "OK")
	entries, err := os.ReadDir(filepath.Join(dir, "d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 49 {
		t.Errorf("%d files created in d, want 49 (50 less d itself)", len(entries))
	}
	wantErrno(t, "symlink past the count", work.Symlink("hello.txt", "sl"), experimentalsys.EIO)
	wantErrno(t, "link past the count", work.Link("hello.txt", "hl"), experimentalsys.EIO)
	wantErrno(t, "mkdir past the count", work.Mkdir("d2", 0o755), experimentalsys.EIO)
	// Removing gives the count back.
	wantErrno(t, "unlink d/f0", work.Unlink("d/f0"), 0)
	wantErrno(t, "symlink after a removal", work.Symlink("hello.txt", "sl"), 0)
	if _, files := q.Used(); files != 50 {
		t.Errorf("%d files charged, want 50", files)
	}
}

// TestQuotaGivesBackWhatIsFreed: rewriting a file (O_TRUNC) or deleting it
// frees its bytes, so an edit loop never runs out; deleting a file still
// open frees nothing on the disk and gives nothing back.
func TestQuotaGivesBackWhatIsFreed(t *testing.T) {
	q := NewQuota(1<<20, 100)
	_, _, work := quotaJail(t, q)
	data := make([]byte, 700<<10)
	for i := range data {
		data[i] = byte(i)
	}
	write := func(name string, flag experimentalsys.Oflag) experimentalsys.Errno {
		f, errno := work.OpenFile(name, oWRONLY|oCREAT|flag, 0o644)
		if errno != 0 {
			return errno
		}
		defer f.Close()
		n, errno := f.Write(data)
		if errno == 0 && n != len(data) {
			return experimentalsys.EIO
		}
		return errno
	}
	for i := range 5 {
		wantErrno(t, fmt.Sprintf("rewrite %d with O_TRUNC", i), write("f", oTRUNC), 0)
	}
	wantErrno(t, "a second 700 KiB file does not fit", write("g", 0), experimentalsys.EIO)
	wantErrno(t, "unlink g", work.Unlink("g"), 0)
	wantErrno(t, "unlink f", work.Unlink("f"), 0)
	wantErrno(t, "after the unlinks, it fits", write("g", 0), 0)

	// Hold g open, unlink it: its blocks stay allocated, so nothing is
	// given back and a new file does not fit, until g's last close.
	f, errno := work.OpenFile("g", oRDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	wantErrno(t, "unlink g while open", work.Unlink("g"), 0)
	wantErrno(t, "a new file while g is held open", write("h", oTRUNC), experimentalsys.EIO)
	f.Close()
	wantErrno(t, "once g is closed, it fits", write("h", oTRUNC), 0)

	// Truncating down gives back what it frees.
	wantErrno(t, "unlink h", work.Unlink("h"), 0)
	before, _ := q.Used()
	wantErrno(t, "write k", write("k", 0), 0)
	k, errno := work.OpenFile("k", oWRONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	wantErrno(t, "truncate k to 0", k.Truncate(0), 0)
	k.Close()
	if after, _ := q.Used(); after != before {
		t.Errorf("after writing and truncating k, %d bytes used, want %d", after, before)
	}
}

// TestQuotaSharedAndCharge: one quota spans a plugin's jails, and the host
// charges what it writes for the plugin to the same quota.
func TestQuotaSharedAndCharge(t *testing.T) {
	q := NewQuota(1000, 10)
	_, _, a := quotaJail(t, q)
	_, _, b := quotaJail(t, q)
	fa, errno := a.OpenFile("x", oWRONLY|oCREAT, 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer fa.Close()
	if n, errno := fa.Write(make([]byte, 600)); errno != 0 || n != 600 {
		t.Fatalf("write 600 in jail a: %d, %v", n, errno)
	}
	fb, errno := b.OpenFile("y", oWRONLY|oCREAT, 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer fb.Close()
	if n, errno := fb.Write(make([]byte, 600)); errno != 0 || n != 400 {
		t.Errorf("write 600 in jail b with 400 left: %d, %v; want a short write of 400", n, errno)
	}
	if err := q.Charge(1, 0); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("host charge past the quota: %v, want ErrQuotaExceeded", err)
	}
	if bytes, files := q.Used(); bytes != 1000 || files != 2 {
		t.Errorf("used %d bytes, %d files; want 1000, 2", bytes, files)
	}
	q.Release(500, 0)
	if err := q.Charge(500, 8); err != nil {
		t.Errorf("host charge within the quota: %v", err)
	}
	if err := q.Charge(0, 1); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("host file past the quota: %v, want ErrQuotaExceeded", err)
	}
}

// TestQuotaAppendPwrite: on an O_APPEND descriptor the kernel puts a
// pwrite at the end whatever its offset, so it is charged there; pwrite at
// offset 0 cannot append past the quota.
func TestQuotaAppendPwrite(t *testing.T) {
	q := NewQuota(1000, 10)
	dir, _, work := quotaJail(t, q)
	f, errno := work.OpenFile("log", oWRONLY|oCREAT|experimentalsys.O_APPEND, 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	var total int
	for i := range 5 {
		n, errno := f.Pwrite(make([]byte, 300), 0)
		total += n
		if i < 3 && (errno != 0 || n != 300) {
			t.Errorf("pwrite %d: %d, %v; want 300 written", i, n, errno)
		}
		if i == 3 && (errno != 0 || n != 100) {
			t.Errorf("pwrite %d: %d, %v; want a short write of 100", i, n, errno)
		}
		if i == 4 && errno != experimentalsys.EIO {
			t.Errorf("pwrite %d past the quota: %d, %v; want EIO", i, n, errno)
		}
	}
	if got := hostSize(t, filepath.Join(dir, "log")); got != 1000 || total != 1000 {
		t.Errorf("log is %d bytes (%d written), want 1000", got, total)
	}
}

// TestQuotaSparseHostFileCreditsNothing: a sparse file the host made
// (the plugin paid nothing for it) holds no blocks, so truncating it,
// through a descriptor or by O_TRUNC, gives the plugin no bytes back: its
// quota still holds exactly what it held.
func TestQuotaSparseHostFileCreditsNothing(t *testing.T) {
	const quota = 1 << 20
	q := NewQuota(quota, 100)
	dir, _, work := quotaJail(t, q)
	for _, name := range []string{"by-truncate", "by-otrunc"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 40); err != nil { // 1 TiB of holes
			t.Fatal(err)
		}
		f.Close()
	}
	f, errno := work.OpenFile("by-truncate", oWRONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	wantErrno(t, "truncate the host's sparse file to 1 MiB", f.Truncate(1<<20), 0)
	wantErrno(t, "truncate it to 0", f.Truncate(0), 0)
	f.Close()
	f, errno = work.OpenFile("by-otrunc", oWRONLY|oTRUNC, 0)
	if errno != 0 {
		t.Fatalf("open the host's sparse file with O_TRUNC: %v", errno)
	}
	f.Close()
	if bytes, _ := q.Used(); bytes != 0 {
		t.Fatalf("after truncating sparse files the host made, the quota holds %d bytes, want 0: a credit the plugin never paid for", bytes)
	}
	// And the plugin can still write no more than its quota.
	g, errno := work.OpenFile("big", oWRONLY|oCREAT, 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer g.Close()
	if n, _ := g.Write(make([]byte, 2*quota)); n != quota {
		t.Fatalf("wrote %d bytes, want %d: the quota", n, quota)
	}
}
