//go:build linux

package image

import (
	"bytes"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// memImage is a captured linear memory in a memfd, mapped privately
// (copy-on-write) into each instance made from it.
type memImage struct {
	fd   int
	size uint64
	refs atomic.Int64 // the image set's reference plus one per live mapping
}

func newMemImage(data []byte) (*memImage, error) {
	fd, err := unix.MemfdCreate("dsh-wasm-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "dsh-wasm-image")
	if err := writeSparse(f, data); err != nil {
		f.Close()
		return nil, fmt.Errorf("write image: %w", err)
	}
	// Nobody may change the image under the instances mapping it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal image: %w", err)
	}
	// The *os.File must not close the descriptor when collected.
	nfd, err := unix.Dup(fd)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("dup image: %w", err)
	}
	unix.CloseOnExec(nfd)
	m := &memImage{fd: nfd, size: uint64(len(data))}
	m.refs.Store(1)
	return m, nil
}

// writeSparse writes data to the empty file f, leaving holes where data
// is zero: a hole reads as zeros, and costs neither a copy nor memory. A
// freshly initialised Go guest's memory is about 40% zero pages.
func writeSparse(f *os.File, data []byte) error {
	if err := f.Truncate(int64(len(data))); err != nil {
		return err
	}
	const chunk = len(zeroChunk)
	zero := func(off int) bool {
		return bytes.Equal(data[off:min(off+chunk, len(data))], zeroChunk[:min(chunk, len(data)-off)])
	}
	for off := 0; off < len(data); {
		for off < len(data) && zero(off) {
			off += chunk
		}
		end := off
		for end < len(data) && !zero(end) {
			end += chunk
		}
		end = min(end, len(data))
		if end > off {
			if _, err := f.WriteAt(data[off:end], int64(off)); err != nil {
				return err
			}
		}
		off = end
	}
	return nil
}

var zeroChunk [4096]byte

func (m *memImage) acquire() { m.refs.Add(1) }

// release drops a reference; the last one closes the memfd. (Mappings
// keep the pages alive on their own; the reference only keeps fd valid
// while a new instance may still map it.)
func (m *memImage) release() {
	if m.refs.Add(-1) == 0 {
		unix.Close(m.fd)
	}
}

// mmapMemory is a linear memory reserved at its maximum size up front, so
// it grows in place: no copy, no zeroing (fresh anonymous pages are zero).
//
// The mapping outlives no guest code that may touch it: wazero frees a
// memory when its module is closed, and a module might be closed while a
// call is still running in it (a host function blocked past the call's
// end, say). So calls mark themselves (Enter, Leave), and a Free during a
// call only flags the memory; the last call to leave unmaps it.
//
// A fresh memory (not from an image) is a memfd mapped shared, shm, until
// it becomes an image (takeImage) or is freed: taking the image is then
// sealing the memfd and mapping it again privately, with no copy.
type mmapMemory struct {
	region    []byte         // the whole reservation, for munmap
	base      unsafe.Pointer // its start, outside the Go heap
	reserved  uint64
	committed uint64
	shm       int          // the memfd behind [0, committed), or -1
	state     atomic.Int64 // calls inside, plus freedBit once freed
	unmapped  atomic.Bool
}

const freedBit = 1 << 62

func (m *mmapMemory) Enter() { m.state.Add(1) }

func (m *mmapMemory) Leave() {
	if m.state.Add(-1) == freedBit {
		m.unmap()
	}
}

var osPage = uint64(os.Getpagesize())

func roundUp(n uint64) uint64 { return (n + osPage - 1) &^ (osPage - 1) }

// newAllocator returns an allocator whose memory starts as img (nil:
// zero). It reports what it made through got: guard stays nil when the
// reservation failed and the memory fell back to the Go heap, zeroed, in
// which case imaged is false and the instance must initialise itself.
func newAllocator(img *memImage, got *Allocation) experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		if maxBytes < capBytes {
			maxBytes = capBytes
		}
		m, err := reserve(roundUp(maxBytes), img)
		if err != nil {
			return &heapMemory{}
		}
		if img == nil {
			// Best effort: without a memfd the memory stays anonymous,
			// and an image of it is a copy.
			if fd, err := unix.MemfdCreate("dsh-wasm-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING); err == nil {
				m.shm = fd
			}
		}
		got.Guard, got.Imaged = m, img != nil
		return m
	})
}

func reserve(size uint64, img *memImage) (*mmapMemory, error) {
	if size == 0 {
		size = osPage
	}
	region, err := unix.Mmap(-1, 0, int(size), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	m := &mmapMemory{region: region, base: unsafe.Pointer(unsafe.SliceData(region)), reserved: size, shm: -1}
	base := uintptr(m.base)
	if img != nil && img.size > 0 {
		if img.size > size {
			m.Free()
			return nil, fmt.Errorf("image of %d bytes exceeds the memory's maximum %d", img.size, size)
		}
		img.acquire()
		_, _, errno := unix.Syscall6(unix.SYS_MMAP, base, uintptr(img.size), unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_FIXED, uintptr(img.fd), 0)
		img.release()
		if errno != 0 {
			m.Free()
			return nil, errno
		}
		m.committed = roundUp(img.size)
	}
	return m, nil
}

// Reallocate implements experimental.LinearMemory.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > m.reserved {
		return nil
	}
	if need := roundUp(size); need > m.committed {
		if m.shm >= 0 {
			if err := unix.Ftruncate(m.shm, int64(need)); err != nil {
				return nil
			}
			if _, _, errno := unix.Syscall6(unix.SYS_MMAP, uintptr(m.base)+uintptr(m.committed), uintptr(need-m.committed),
				unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED, uintptr(m.shm), uintptr(m.committed)); errno != 0 {
				return nil
			}
		} else if _, _, errno := unix.Syscall(unix.SYS_MPROTECT, uintptr(m.base)+uintptr(m.committed), uintptr(need-m.committed),
			unix.PROT_READ|unix.PROT_WRITE); errno != 0 {
			return nil
		}
		m.committed = need
	}
	if size == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(m.base), size)
}

// Free implements experimental.LinearMemory.
func (m *mmapMemory) Free() {
	if m.state.Add(freedBit) == freedBit {
		m.unmap()
	}
}

func (m *mmapMemory) unmap() {
	if m.base != nil && !m.unmapped.Swap(true) {
		unix.Munmap(m.region)
		if m.shm >= 0 {
			unix.Close(m.shm)
		}
	}
}

// takeImage makes the memory, while it is still its shared memfd, an
// image of its first size bytes without copying them: the memfd is mapped
// again privately at the same address (the instance goes on copy-on-write,
// as one made from an image) and sealed. It runs between calls, when no
// guest code runs in the instance. ok is false when the memory is not a
// shared memfd of that size; the caller copies instead.
func (m *mmapMemory) takeImage(size uint64) (_ *memImage, ok bool) {
	if m.shm < 0 || size == 0 || roundUp(size) != m.committed || m.unmapped.Load() {
		return nil, false
	}
	fd := m.shm
	if _, _, errno := unix.Syscall6(unix.SYS_MMAP, uintptr(m.base), uintptr(m.committed), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_FIXED, uintptr(fd), 0); errno != 0 {
		return nil, false
	}
	// From here the memory is a private mapping, grown by mprotect like
	// an image-made instance's; the memfd belongs to the image or to no one.
	m.shm = -1
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, false
	}
	img := &memImage{fd: fd, size: size}
	img.refs.Store(1)
	return img, true
}
