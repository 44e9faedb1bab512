//go:build !unix

package fsjail

func openMount(Mount, *openCounter, *Quota) (mountFS, error) {
	return nil, ErrUnsupportedPlatform
}

func linkNested([]mountFS) error { return nil }

func linkHidden([]Mount, []mountFS, []string) error { return nil }
