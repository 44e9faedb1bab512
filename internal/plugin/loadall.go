package plugin

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// A batch prepares the modules of LoadAll's specs on up to GOMAXPROCS
// goroutines, in the order given, while LoadAll takes each in turn and
// commits it. Preparing touches nothing another plugin sees (the registry,
// the bus, the loaded set): it makes the plugin's own runtime and compiled
// module. So the order in which preparations finish cannot change what is
// registered, nor in what order: that is LoadAll's loop alone.

// errSkipped marks a spec the batch did not prepare because LoadAll had
// already stopped; LoadAll never takes such a spec.
var errSkipped = errors.New("not prepared: the batch stopped")

type batch struct {
	h     *Host
	specs []Spec
	slots []prepared
	next  atomic.Int64 // the next spec to prepare
	stop  atomic.Bool  // LoadAll returned: prepare nothing more
	taken int          // the slots LoadAll has taken, owning their plugins
	wg    sync.WaitGroup
}

// prepared is one spec's preparation; done is closed once p or err is set.
type prepared struct {
	p     *Plugin
	err   error
	panic any // what prepare panicked with, re-raised in LoadAll's goroutine
	done  chan struct{}
}

func newBatch(h *Host, ctx context.Context, specs []Spec) *batch {
	b := &batch{h: h, specs: specs, slots: make([]prepared, len(specs))}
	for i := range b.slots {
		b.slots[i].done = make(chan struct{})
	}
	n := min(runtime.GOMAXPROCS(0), len(specs))
	b.wg.Add(n)
	for range n {
		go b.work(ctx)
	}
	return b
}

func (b *batch) work(ctx context.Context) {
	defer b.wg.Done()
	for {
		i := int(b.next.Add(1) - 1)
		if i >= len(b.specs) {
			return
		}
		s := &b.slots[i]
		if b.stop.Load() {
			s.err = errSkipped
		} else {
			b.prepareAt(ctx, i, s)
		}
		close(s.done)
	}
}

func (b *batch) prepareAt(ctx context.Context, i int, s *prepared) {
	defer func() {
		if v := recover(); v != nil {
			s.p, s.err, s.panic = nil, fmt.Errorf("prepare panicked: %v", v), v
		}
	}()
	spec := b.specs[i]
	// The same module loaded twice (under two names): let the first
	// compile it, so that the second finds it compiled. wazero compiles a
	// module that two runtimes ask for at once twice.
	for k := range i {
		if b.specs[k].Source == spec.Source {
			<-b.slots[k].done
			break
		}
	}
	name, err := b.h.checkName(spec)
	if err != nil {
		s.err = err
		return
	}
	s.p, s.err = b.h.prepare(ctx, name, spec)
}

// take waits for spec i's preparation and hands its plugin to the caller.
// Specs are taken in order.
func (b *batch) take(i int) prepared {
	s := &b.slots[i]
	<-s.done
	pr := *s
	s.p = nil
	b.taken = i + 1
	if pr.panic != nil {
		panic(pr.panic)
	}
	return pr
}

// finish stops the batch, waits for the preparations under way and
// releases every plugin prepared and not taken.
func (b *batch) finish() {
	b.stop.Store(true)
	b.wg.Wait()
	for i := b.taken; i < len(b.slots); i++ {
		if p := b.slots[i].p; p != nil {
			b.slots[i].p = nil
			p.close(errDiscarded)
		}
	}
}
