package session_test

import (
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/storetest"
)

// The JSONL store meets the storage contract.
func TestStorageContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) session.Storage {
		var opts []session.Option
		if now != nil {
			opts = append(opts, session.WithClock(now))
		}
		return session.NewStore(t.TempDir(), opts...)
	})
}
