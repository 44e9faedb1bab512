//go:build linux

package modcache

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a file read-only, its pages populated at once: a cached
// module is read where the page cache holds it, without a copy onto the Go
// heap. release unmaps it; nothing may use the bytes after. The file must
// not be truncated while mapped (the cache replaces entries by renaming,
// never in place).
func mapFile(path string) (b []byte, release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	n := st.Size()
	if n <= 0 || int64(int(n)) != n {
		return nil, nil, errors.New("cannot map an empty or huge file")
	}
	b, err = unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { unix.Munmap(b) }, nil
}
