package session

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// checkID rejects ids that cannot be a file name in the file store's
// layout; every store keeps to them, so sessions move between stores.
func checkID(id string) error {
	switch {
	case id == "", id == ".", id == "..":
	case len(id) > 200:
	case strings.ContainsAny(id, `/\`+"\x00"):
	default:
		return nil
	}
	return fmt.Errorf("%w: %q", ErrInvalidID, id)
}

// newID returns a random UUID (version 4), the reference's id format.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
