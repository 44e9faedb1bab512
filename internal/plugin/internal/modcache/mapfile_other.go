//go:build !linux

package modcache

import "os"

// mapFile reads a file; elsewhere than Linux it is not mapped.
func mapFile(path string) (b []byte, release func(), err error) {
	b, err = os.ReadFile(path)
	return b, func() {}, err
}
