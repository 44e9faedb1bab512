// Package image keeps copy-on-write images of plugin instances.
//
// A Go guest spends 5-15 ms and about 5 MiB in its reactor
// initialiser (_initialize: the Go runtime and every package's init)
// before it can answer a call, and every agent's instance paid it again.
// Instead, the first instance of a plugin in a given environment records
// an image of itself right after _initialize: its linear memory and its
// mutable globals. Later instances in the same environment start from the
// image: the memory is the image mapped copy-on-write (only the pages an
// agent writes become its own), the globals are set, and neither the data
// segments nor _initialize run. dsh_setup still runs in every instance,
// since it may read agent- or session-scoped facts.
//
// The environment is what a guest's initialiser may read and keep: the
// preopened directories (Go's syscall package lists them once, at init),
// the environment variables and the arguments. An image is used only by
// instances whose environment is the same; another environment gets an
// image of its own, from its first instance.
//
// What an image shares between instances is the state of a freshly
// initialised guest, which any two fresh instances of the same module
// would hold alike, with one exception: seeds the guest drew from WASI's
// random source during init (Go's runtime seeds its map hashing and
// math/rand from it). Instances from one image draw the same seeds, so
// non-cryptographic random sequences repeat across agents of one plugin.
// Cryptographic randomness reads the random source at each use and is not
// shared. A plugin that must not share them opts out with
// Limits.NoSnapshot (grants.limits.snapshot: false).
//
// The package knows modules, memories and globals, never plugins: the
// host chooses the environment key and whether images are used at all.
package image

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Set holds a plugin's images by environment. The zero Set is empty.
type Set struct {
	mu        sync.Mutex
	byEnv     map[string]*Image
	capturing map[string]bool // envs whose post-setup image is being taken
	closed    bool
}

// Image is one captured instance state.
type Image struct {
	mem     *memImage // the linear memory, shareable copy-on-write
	pages   uint32    // memory size in pages
	globals []uint64  // by Layout.GlobalExports
	// setupDone: captured after dsh_setup, which had asked the host
	// nothing agent- or session-scoped; instances from it skip dsh_setup.
	setupDone bool
}

// SetupDone reports whether img was captured after dsh_setup, so that an
// instance from it skips dsh_setup.
func (img *Image) SetupDone() bool { return img.setupDone }

// Release gives back what For acquired, once the instance has mapped it
// (or failed to).
func (img *Image) Release() { img.mem.release() }

// For returns the image for env, or nil. The image's memory is acquired:
// the caller releases it (Release) once the instance has mapped it (an
// image replaced meanwhile must not close the descriptor under it).
func (s *Set) For(env string) *Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	img := s.byEnv[env]
	if img != nil {
		img.mem.acquire()
	}
	return img
}

// Len is the number of images held.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byEnv)
}

// Capture records mod's state as the image for env, unless there is one.
// It runs right after _initialize, before any other guest code. globals
// are the exports of the module's mutable globals; guard is the
// instance's memory when it is outside the Go heap (Allocation.Guard).
// An error says why no image was taken; none is needed.
func (s *Set) Capture(mod api.Module, env string, globals []string, guard MemGuard) error {
	if m := mod.Memory(); m == nil || m.Size() < MinBytes {
		return nil // initialising is cheaper than mapping an image
	}
	s.mu.Lock()
	if s.closed || s.byEnv[env] != nil {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	img, err := newImage(mod, globals, guard)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.byEnv[env] != nil {
		img.mem.release()
		return nil
	}
	if s.byEnv == nil {
		s.byEnv = map[string]*Image{}
	}
	s.byEnv[env] = img
	return nil
}

// CaptureSetup replaces env's image, if it was captured before dsh_setup,
// with one of mod right after a dsh_setup that made no agent- or
// session-scoped host call (the caller checked): every agent's setup
// would end in this same state, so instances from it skip setup too.
func (s *Set) CaptureSetup(mod api.Module, env string, globals []string, guard MemGuard) error {
	s.mu.Lock()
	old := s.byEnv[env]
	busy := s.closed || old == nil || old.setupDone || s.capturing[env]
	if !busy {
		if s.capturing == nil {
			s.capturing = map[string]bool{}
		}
		s.capturing[env] = true
	}
	s.mu.Unlock()
	if busy {
		return nil
	}
	img, err := newImage(mod, globals, guard)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.capturing, env)
	if err != nil {
		return err
	}
	if s.closed || s.byEnv[env] != old {
		img.mem.release()
		return nil
	}
	img.setupDone = true
	s.byEnv[env] = img
	old.mem.release()
	return nil
}

// Close releases the images. Instances made from them keep their own
// mappings; nothing is captured after.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, img := range s.byEnv {
		img.mem.release()
	}
	s.byEnv = nil
}

// imageTaker is a memory that can become an image without a copy (a
// fresh instance's memfd, on Linux).
type imageTaker interface {
	takeImage(size uint64) (*memImage, bool)
}

// newImage records mod's state. guard is the instance's memory when it is
// outside the Go heap (nil otherwise): when it can become the image
// itself, nothing is copied.
func newImage(mod api.Module, globals []string, guard MemGuard) (*Image, error) {
	mem := mod.Memory()
	if mem == nil {
		return nil, fmt.Errorf("no memory")
	}
	data, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, fmt.Errorf("memory not readable")
	}
	img := &Image{pages: mem.Size() / PageSize}
	for _, name := range globals {
		g := mod.ExportedGlobal(name)
		if g == nil {
			return nil, fmt.Errorf("global %s is not exported", name)
		}
		img.globals = append(img.globals, g.Get())
	}
	if t, ok := guard.(imageTaker); ok {
		if m, ok := t.takeImage(uint64(len(data))); ok {
			img.mem = m
			return img, nil
		}
	}
	m, err := newMemImage(data)
	if err != nil {
		return nil, err
	}
	img.mem = m
	return img, nil
}

// PageSize is the size of a Wasm memory page.
const PageSize = 65536

// MinBytes is the smallest initialised memory worth an image. Below
// it (a C guest's 128 KiB, say) running the initialiser again costs less
// than reserving and mapping the image: 93 µs against 258 µs for bench-c
// in `go run ./bench -only "new agent"`.
const MinBytes = 1 << 20

// MemGuard is an instance's memory that calls must mark themselves in,
// because it is not on the Go heap (see mmapMemory).
type MemGuard interface {
	Enter()
	Leave()
}

// Allocation is what InstantiateContext's allocator made.
type Allocation struct {
	Guard  MemGuard // nil: the memory is on the Go heap
	Imaged bool     // the memory holds the image
}

// heapMemory is an ordinary Go-heap memory, for when a mapping cannot be
// reserved.
type heapMemory struct {
	buf []byte
}

func (h *heapMemory) Reallocate(size uint64) []byte {
	if size <= uint64(cap(h.buf)) {
		h.buf = h.buf[:size]
	} else {
		h.buf = append(h.buf[:cap(h.buf)], make([]byte, size-uint64(cap(h.buf)))...)
	}
	return h.buf
}

func (h *heapMemory) Free() {}

// InstantiateContext returns the context to instantiate a module under:
// with an allocator that maps img as the initial memory (nil: zeroed
// memory), outside the Go heap, reserved at its maximum so that growing
// it copies nothing. got receives what was made.
func InstantiateContext(ctx context.Context, img *Image, got *Allocation) context.Context {
	var src *memImage
	if img != nil {
		src = img.mem
	}
	if a := newAllocator(src, got); a != nil {
		return experimental.WithMemoryAllocator(ctx, a)
	}
	return ctx
}

// Restore sets a new instance from img: memory grown to the image's size
// (the allocator already maps the image's bytes there) and every mutable
// global set.
func (img *Image) Restore(mod api.Module, globals []string) error {
	mem := mod.Memory()
	if cur := mem.Size() / PageSize; cur < img.pages {
		if _, ok := mem.Grow(img.pages - cur); !ok {
			return fmt.Errorf("cannot grow memory to the image's %d pages", img.pages)
		}
	}
	for i, name := range globals {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("global %s is not exported as mutable", name)
		}
		g.Set(img.globals[i])
	}
	return nil
}
