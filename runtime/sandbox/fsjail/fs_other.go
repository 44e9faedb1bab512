//go:build !unix

package fsjail

func openMount(Mount) (mountFS, error) {
	return nil, ErrUnsupportedPlatform
}
