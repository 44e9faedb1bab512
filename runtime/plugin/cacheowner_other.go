//go:build !unix

package plugin

import "os"

func checkOwner(string, os.FileInfo) error { return nil }
