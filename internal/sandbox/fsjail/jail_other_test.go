//go:build !unix

package fsjail

import (
	"errors"
	"testing"
)

func TestUnsupportedPlatform(t *testing.T) {
	j, err := New([]Mount{{HostPath: t.TempDir(), GuestPath: "/work"}})
	if !errors.Is(err, ErrUnsupportedPlatform) {
		if j != nil {
			j.Close()
		}
		t.Fatalf("New: %v, want ErrUnsupportedPlatform", err)
	}
}
