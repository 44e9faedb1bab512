//go:build wasip1

package toolpath

import (
	"path"
	"sync"
	"unsafe"
)

//go:wasmimport wasi_snapshot_preview1 fd_prestat_get
func fdPrestatGet(fd int32, buf unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 fd_prestat_dir_name
func fdPrestatDirName(fd int32, buf unsafe.Pointer, n uint32) uint32

var (
	rootsOnce sync.Once
	roots     []string
)

// Roots lists the directories the host mounted into this instance (the
// WASI preopens), cleaned. They are the plugin's granted fs roots, each at
// its host path. The list is read once: an instance's mounts never change.
func Roots() []string {
	rootsOnce.Do(func() {
		for fd := int32(3); fd < 1024; fd++ {
			var st [8]byte // struct prestat: u8 tag, 3 bytes padding, u32 name length
			if fdPrestatGet(fd, unsafe.Pointer(&st[0])) != 0 {
				break // EBADF: no more preopens
			}
			if st[0] != 0 { // not a directory
				continue
			}
			n := uint32(st[4]) | uint32(st[5])<<8 | uint32(st[6])<<16 | uint32(st[7])<<24
			if n == 0 || n > 4096 {
				continue
			}
			name := make([]byte, n)
			if fdPrestatDirName(fd, unsafe.Pointer(&name[0]), n) != 0 {
				continue
			}
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			if len(name) == 0 || name[0] != '/' {
				continue
			}
			roots = append(roots, path.Clean(string(name)))
		}
	})
	return roots
}
