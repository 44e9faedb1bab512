package filestore_test

import (
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/storetest"
)

// The file store meets the storage contract.
func TestStorageContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) session.Storage {
		return filestore.New(t.TempDir(), filestore.Options{Now: now})
	})
}
