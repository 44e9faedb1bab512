//go:build !unix

package fsjail

func openMount(Mount, *openCounter) (mountFS, error) {
	return nil, ErrUnsupportedPlatform
}

func linkNested([]mountFS) error { return nil }
