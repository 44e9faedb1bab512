package session

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// CheckID rejects ids that cannot be a file name in the file store's
// layout (empty, ".", "..", over 200 bytes, or holding a slash, a
// backslash or NUL), wrapping ErrInvalidID. Prepare checks every new
// session's id with it, so sessions move between stores; a store that turns
// ids into paths checks every id it is given, so none reaches outside its
// root.
func CheckID(id string) error {
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
