// Package toolpath resolves the paths a model gives the built-in tool
// plugins (tool-fs, tool-bash). A relative path is relative to the calling
// agent's working directory; an absolute path is taken as it is. Either way
// the cleaned result must lie inside one of the roots the host mounted for
// the instance (each granted fs root, at its own host path), or it is
// refused with a message naming the roots.
package toolpath

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrOutsideRoots marks a path that resolves outside every granted root.
var ErrOutsideRoots = errors.New("outside the granted roots")

// Resolve returns the absolute, cleaned path for p, given the agent's
// working directory cwd and the granted roots. p is what the model sent;
// errors quote it as sent.
func Resolve(p, cwd string, roots []string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("the path is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	abs := p
	if !path.IsAbs(p) {
		if cwd == "" {
			return "", fmt.Errorf("relative path %q needs a working directory, and this call has none; use an absolute path", p)
		}
		abs = path.Join(cwd, p)
	}
	abs = path.Clean(abs)
	if Within(abs, roots) {
		return abs, nil
	}
	if len(roots) == 0 {
		return "", fmt.Errorf("path %q: %w: no filesystem is granted to this plugin", p, ErrOutsideRoots)
	}
	return "", fmt.Errorf("path %q resolves to %s, %w (%s)", p, abs, ErrOutsideRoots, strings.Join(roots, ", "))
}

// Within reports whether the clean absolute path abs is one of roots or
// below one.
func Within(abs string, roots []string) bool {
	for _, r := range roots {
		if r == "/" || abs == r || strings.HasPrefix(abs, r) && abs[len(r)] == '/' {
			return true
		}
	}
	return false
}
