//go:build unix && !linux

package workdir

import "fmt"

func fdPath(fd int) string { return fmt.Sprintf("/dev/fd/%d", fd) }

func openat2(int, string) (int, error) { return -1, errNoOpenat2 }
