//go:build !unix

package workdir

import (
	"errors"
	"os"
)

func openBeneath(string, string, bool) (*os.Root, error) {
	return nil, errors.New("workdir: opening beneath a base needs a Unix system")
}
