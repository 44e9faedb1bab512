//go:build !linux

package image

import (
	"errors"

	"github.com/tetratelabs/wazero/experimental"
)

// Images need memfd and mmap; elsewhere every instance starts fresh.
type memImage struct{}

func newMemImage([]byte) (*memImage, error) {
	return nil, errors.New("instance images are supported on Linux only")
}

func (*memImage) release() {}

func (*memImage) acquire() {}

func newAllocator(*memImage, *Allocation) experimental.MemoryAllocator { return nil }
