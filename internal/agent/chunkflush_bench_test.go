package agent

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// slowBackend is a store whose every write takes a commit's time.
type slowBackend struct {
	commit time.Duration
	writes atomic.Int64
}

func (b *slowBackend) Append([]session.Record) error {
	b.writes.Add(1)
	time.Sleep(b.commit)
	return nil
}

func (b *slowBackend) Close() error { return nil }

// BenchmarkChunkFlush is what the batched chunk flush costs a turn: the
// model streams 200 chunks 1ms apart to a store whose writes take 2ms (a
// PostgreSQL commit on a LAN), and the turn is timed from Prompt to its
// return. "message" leaves chunks to the assistant message's flush (the
// durability before chunks were streamed only once stored: the baseline);
// "batched-50ms" is the default; "every-chunk" flushes at once per chunk
// (a 1ns interval). writes/op is the store writes per turn.
func BenchmarkChunkFlush(b *testing.B) {
	const chunks = 200
	for _, c := range []struct {
		name  string
		every time.Duration
	}{{"message", -1}, {"batched-50ms", 0}, {"every-chunk", time.Nanosecond}} {
		b.Run(c.name, func(b *testing.B) {
			var writes int64
			for range b.N {
				p, err := session.Prepare(session.Header{Cwd: "/srv/project"}, nil)
				if err != nil {
					b.Fatal(err)
				}
				be := &slowBackend{commit: 2 * time.Millisecond}
				sess, err := session.Resume("bench", p.Log, be, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				prov := model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
					if err := emit(model.Chunk{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText}); err != nil {
						return err
					}
					for i := range chunks {
						if err := emit(model.Chunk{Type: model.ChunkTextDelta, Index: 0, Text: "w" + strconv.Itoa(i) + " "}); err != nil {
							return err
						}
						time.Sleep(time.Millisecond)
					}
					for _, ch := range []model.Chunk{{Type: model.ChunkBlockEnd, Index: 0}, usageChunk(10, chunks), finish(model.FinishStop)} {
						if err := emit(ch); err != nil {
							return err
						}
					}
					return nil
				})
				f := newFixture(b, Options{Session: sess, Provider: prov, ChunkFlush: c.every, OnEvent: func(session.Event) {}})
				f.prompt(b, "go")
				writes += be.writes.Load()
				sess.Close()
			}
			b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
		})
	}
}
