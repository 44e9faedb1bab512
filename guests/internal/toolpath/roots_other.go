//go:build !wasip1

package toolpath

// Roots outside Wasm: there are no mounts; the tools run only as guests.
func Roots() []string { return nil }
