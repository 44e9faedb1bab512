package extism

import (
	"encoding/binary"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// Kernel is one instance of the kernel, beside one guest: its memory and
// the globals through which the host passes the input, reads the output
// and the error, and fails a call.
type Kernel struct {
	mod                                               api.Module
	mem                                               api.Memory
	heap, inOff, inLen, outOff, outLen, errOff, abort api.MutableGlobal
}

// NewKernel binds an instance of Module.
func NewKernel(mod api.Module) *Kernel {
	k := &Kernel{mod: mod, mem: mod.Memory()}
	for name, g := range map[string]*api.MutableGlobal{GlobalHeap: &k.heap, GlobalInOff: &k.inOff, GlobalInLen: &k.inLen,
		GlobalOutOff: &k.outOff, GlobalOutLen: &k.outLen, GlobalErr: &k.errOff, GlobalAbort: &k.abort} {
		*g = mod.ExportedGlobal(name).(api.MutableGlobal)
	}
	return k
}

// Reset empties the kernel before a call: every block of the last call is
// gone, and there is no input, output, error or abort.
func (k *Kernel) Reset() {
	k.heap.Set(Base)
	k.outOff.Set(0)
	k.outLen.Set(0)
	k.errOff.Set(0)
	k.abort.Set(0)
	k.inOff.Set(0)
	k.inLen.Set(0)
}

// SetInput makes b the call's input.
func (k *Kernel) SetInput(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	off, err := k.WriteBlock(b)
	if err != nil {
		return err
	}
	k.inOff.Set(off)
	k.inLen.Set(uint64(len(b)))
	return nil
}

// Output returns a copy of what the guest set as its output (nil for
// none); more than max bytes is an error.
func (k *Kernel) Output(max uint64) ([]byte, error) {
	n := k.outLen.Get()
	if n == 0 {
		return nil, nil
	}
	if n > max {
		return nil, fmt.Errorf("%d bytes of output exceed the limit of %d", n, max)
	}
	off := k.outOff.Get()
	b, ok := k.mem.Read(uint32(off), uint32(n))
	if !ok || off > 1<<32 {
		return nil, fmt.Errorf("output at %#x+%d is outside the kernel's memory (%d bytes)", off, n, k.mem.Size())
	}
	return append([]byte(nil), b...), nil
}

// ErrorSet returns the message the guest gave error_set, if it did; the
// bytes are the kernel's, valid until the next call.
func (k *Kernel) ErrorSet() (_ []byte, set bool, _ error) {
	off := k.errOff.Get()
	if off == 0 {
		return nil, false, nil
	}
	b, err := k.ReadBlock(off)
	return b, err == nil, err
}

// Abort makes the kernel function in progress trap once the Go function
// it called returns: how a host function fails the call.
func (k *Kernel) Abort() { k.abort.Set(1) }

// ReadBlock returns the block at off: a view of kernel memory, valid until
// the guest runs again.
func (k *Kernel) ReadBlock(off uint64) ([]byte, error) {
	heap := k.heap.Get()
	if off < Base+8 || off >= heap {
		return nil, fmt.Errorf("offset %#x is not an allocated block", off)
	}
	hdr, ok := k.mem.Read(uint32(off-8), 8)
	if !ok {
		return nil, fmt.Errorf("offset %#x is outside the kernel's memory", off)
	}
	n := binary.LittleEndian.Uint64(hdr)
	if n > heap-off {
		return nil, fmt.Errorf("block %#x claims %d bytes past the heap", off, n)
	}
	b, ok := k.mem.Read(uint32(off), uint32(n))
	if !ok {
		return nil, fmt.Errorf("block %#x+%d is outside the kernel's memory", off, n)
	}
	return b, nil
}

// WriteBlock allocates a block as the kernel's alloc does and copies b in.
func (k *Kernel) WriteBlock(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p := k.heap.Get() + 8
	end := p + (uint64(len(b))+7)&^7
	if size := uint64(k.mem.Size()); end > size {
		pages := (end - size + 65535) >> 16
		if _, ok := k.mem.Grow(uint32(pages)); !ok {
			return 0, fmt.Errorf("%d bytes do not fit in the Extism kernel's memory (grant more memory)", len(b))
		}
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(b)))
	if !k.mem.Write(uint32(p-8), hdr[:]) || !k.mem.Write(uint32(p), b) {
		return 0, fmt.Errorf("kernel write at %#x failed", p)
	}
	k.heap.Set(end)
	return p, nil
}
