package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/interrupt"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Images. A Go guest spends 5-15 ms and about 5 MiB in its reactor
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

// imageSet holds a plugin's images by environment.
type imageSet struct {
	mu        sync.Mutex
	byEnv     map[string]*image
	capturing map[string]bool // envs whose post-setup image is being taken
	closed    bool
}

// image is one captured instance state.
type image struct {
	mem     *memImage // the linear memory, shareable copy-on-write
	pages   uint32    // memory size in pages
	globals []uint64  // by Layout.GlobalExports
	// setupDone: captured after dsh_setup, which had asked the host
	// nothing agent- or session-scoped; instances from it skip dsh_setup.
	setupDone bool
}

// snapshotGlobals lists the exports through which a prepared module's
// mutable globals are read and set, or nil when the module was not
// prepared for images.
func snapshotGlobals(m interface {
	ExportedFunctions() map[string]api.FunctionDefinition
}, globals []string) []string {
	if _, ok := m.ExportedFunctions()[interrupt.DataExport]; !ok {
		return nil
	}
	return globals
}

// environment is the key of the images an instance may use.
func (p *Plugin) environment(jail *fsjail.Jail, env []string) string {
	var b strings.Builder
	b.WriteString(p.name)
	b.WriteByte(0)
	if jail != nil {
		for _, m := range jail.Mounts() {
			b.WriteString(m.GuestPath)
			b.WriteByte(0)
		}
	}
	b.WriteByte(1)
	for _, kv := range env {
		b.WriteString(kv)
		b.WriteByte(0)
	}
	return b.String()
}

// imageFor returns the image for env, or nil. The image's memory is
// acquired: the caller releases it once the instance has mapped it (an
// image replaced meanwhile must not close the descriptor under it).
func (p *Plugin) imageFor(env string) *image {
	if !p.snapshots {
		return nil
	}
	p.images.mu.Lock()
	defer p.images.mu.Unlock()
	img := p.images.byEnv[env]
	if img != nil {
		img.mem.acquire()
	}
	return img
}

// capture records mod's state as the image for env, unless there is one.
// It runs right after _initialize, before any other guest code.
func (p *Plugin) capture(mod api.Module, env string, guard memGuard) {
	if !p.snapshots {
		return
	}
	if m := mod.Memory(); m == nil || m.Size() < minImageBytes {
		return // initialising is cheaper than mapping an image
	}
	p.images.mu.Lock()
	if p.images.closed || p.images.byEnv[env] != nil {
		p.images.mu.Unlock()
		return
	}
	p.images.mu.Unlock()
	img, err := newImage(mod, p.snapGlobals, guard)
	if err != nil {
		p.log.Debug("no instance image; later instances start fresh", "err", err)
		return
	}
	p.images.mu.Lock()
	defer p.images.mu.Unlock()
	if p.images.closed || p.images.byEnv[env] != nil {
		img.mem.release()
		return
	}
	if p.images.byEnv == nil {
		p.images.byEnv = map[string]*image{}
	}
	p.images.byEnv[env] = img
}

// captureSetup replaces env's image, if it was captured before dsh_setup,
// with one of mod right after a dsh_setup that made no agent- or
// session-scoped host call (the caller checked): every agent's setup
// would end in this same state, so instances from it skip setup too.
func (p *Plugin) captureSetup(mod api.Module, env string, guard memGuard) {
	if !p.snapshots {
		return
	}
	p.images.mu.Lock()
	old := p.images.byEnv[env]
	busy := p.images.closed || old == nil || old.setupDone || p.images.capturing[env]
	if !busy {
		if p.images.capturing == nil {
			p.images.capturing = map[string]bool{}
		}
		p.images.capturing[env] = true
	}
	p.images.mu.Unlock()
	if busy {
		return
	}
	img, err := newImage(mod, p.snapGlobals, guard)
	p.images.mu.Lock()
	defer p.images.mu.Unlock()
	delete(p.images.capturing, env)
	if err != nil {
		p.log.Debug("no post-setup image; instances keep running dsh_setup", "err", err)
		return
	}
	if p.images.closed || p.images.byEnv[env] != old {
		img.mem.release()
		return
	}
	img.setupDone = true
	p.images.byEnv[env] = img
	old.mem.release()
}

// closeImages releases the plugin's images. Instances made from them keep
// their own mappings.
func (p *Plugin) closeImages() {
	p.images.mu.Lock()
	defer p.images.mu.Unlock()
	p.images.closed = true
	for _, img := range p.images.byEnv {
		img.mem.release()
	}
	p.images.byEnv = nil
}

// imageTaker is a memory that can become an image without a copy (a
// fresh instance's memfd, on Linux).
type imageTaker interface {
	takeImage(size uint64) (*memImage, bool)
}

// newImage records mod's state. guard is the instance's memory when it is
// outside the Go heap (nil otherwise): when it can become the image
// itself, nothing is copied.
func newImage(mod api.Module, globals []string, guard memGuard) (*image, error) {
	mem := mod.Memory()
	if mem == nil {
		return nil, fmt.Errorf("no memory")
	}
	data, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, fmt.Errorf("memory not readable")
	}
	img := &image{pages: mem.Size() / pageSize}
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

const pageSize = 65536

// minImageBytes is the smallest initialised memory worth an image. Below
// it (a C guest's 128 KiB, say) running the initialiser again costs less
// than reserving and mapping the image: 93 µs against 258 µs for bench-c
// in `go run ./bench -only "new agent"`.
const minImageBytes = 1 << 20

// memGuard is an instance's memory that calls must mark themselves in,
// because it is not on the Go heap (see mmapMemory).
type memGuard interface {
	enter()
	leave()
}

// allocation is what instantiateContext's allocator made.
type allocation struct {
	guard  memGuard // nil: the memory is on the Go heap
	imaged bool     // the memory holds the image
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

// instantiateContext returns the context to instantiate a module under:
// with an allocator that maps img as the initial memory (nil: zeroed
// memory), outside the Go heap, reserved at its maximum so that growing
// it copies nothing. got receives what was made.
func instantiateContext(ctx context.Context, img *image, got *allocation) context.Context {
	var src *memImage
	if img != nil {
		src = img.mem
	}
	if a := newAllocator(src, got); a != nil {
		return experimental.WithMemoryAllocator(ctx, a)
	}
	return ctx
}

// restore sets a new instance from img: memory grown to the image's size
// (the allocator already maps the image's bytes there) and every mutable
// global set.
func (img *image) restore(mod api.Module, globals []string) error {
	mem := mod.Memory()
	if cur := mem.Size() / pageSize; cur < img.pages {
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
