package deploy

import (
	"io"

	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Recorder is a model provider that passes every request to another
// provider and keeps what it answered, so that a session can be replayed
// later (SessionOptions.Replay) without the model.
type Recorder interface {
	model.Provider
	// Close writes the first session that called the model to the writer
	// given to NewRecorder.
	Close() error
}

// NewRecorder records what inner answers; Close writes the recording to w
// in the session format a replay reads.
func NewRecorder(inner model.Provider, w io.Writer) Recorder {
	return replay.NewRecorder(inner, w)
}
