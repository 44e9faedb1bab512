//go:build !linux

package plugin

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

func newAllocator(*memImage, *allocation) experimental.MemoryAllocator { return nil }
