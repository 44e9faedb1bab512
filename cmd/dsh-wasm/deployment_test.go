package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/syncbuf"
)

// A command that ends stops the background compilation: it waits for a
// compilation that honours cancellation to end, and only a bounded time
// for one that does not (a wazero compilation cannot be stopped).
func TestBackgroundCompileStop(t *testing.T) {
	t.Run("a compilation that ignores cancellation", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		var ended atomic.Bool
		stop := runInBackground(func(context.Context) error {
			<-release
			ended.Store(true)
			return nil
		}, 50*time.Millisecond, slog.New(slog.DiscardHandler))
		returned := make(chan struct{})
		go func() { stop(); close(returned) }()
		select {
		case <-returned:
		case <-time.After(30 * time.Second):
			t.Fatal("stop waited for a compilation that does not stop")
		}
		if ended.Load() {
			t.Error("the compilation ended; the test needs one still under way")
		}
	})
	t.Run("a compilation that stops", func(t *testing.T) {
		var logs syncbuf.Buffer
		var ended atomic.Bool
		started := make(chan struct{})
		stop := runInBackground(func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // finishing the module under way
			ended.Store(true)
			return ctx.Err()
		}, time.Minute, slog.New(slog.NewTextHandler(&logs, nil)))
		<-started
		stop()
		if !ended.Load() {
			t.Error("stop returned before the compilation ended")
		}
		if logs.String() != "" {
			t.Errorf("a cancelled compilation was logged as a failure: %s", logs.String())
		}
	})
	t.Run("a failure", func(t *testing.T) {
		var logs syncbuf.Buffer
		failed := make(chan struct{})
		stop := runInBackground(func(context.Context) error {
			defer close(failed)
			return errors.New("plugin kit: module does not validate")
		}, time.Minute, slog.New(slog.NewTextHandler(&logs, nil)))
		<-failed
		stop()
		if !strings.Contains(logs.String(), "module does not validate") {
			t.Errorf("log = %q, want the failure", logs.String())
		}
	})
}
