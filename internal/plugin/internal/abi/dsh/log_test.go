package dsh

import (
	"log/slog"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// TestPlainLogRequests: the log requests the SDKs write with a plain
// message skip the general reader, and every request the plain reader
// accepts, the general one accepts too, with the same level and message.
func TestPlainLogRequests(t *testing.T) {
	sdk := func(level, msg string) []byte { // as hostfns/guest.Log writes it
		b := jsonobj.AppendQuote([]byte(`{"level":`), level)
		b = append(b, `,"message":`...)
		return append(jsonobj.AppendQuote(b, msg), '}')
	}
	levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	for name, want := range levels {
		for _, msg := range []string{"", "echo", "a plain message: 1 + 1 = 2 {ok} [yes]"} {
			level, got, ok := readPlainLogRequest(sdk(name, msg))
			if !ok || level != want || string(got) != msg {
				t.Errorf("SDK request %s %q: plain reader gave %v %q %v", name, msg, level, got, ok)
			}
		}
	}
	reqs := []string{
		`{"level":"info","message":"x"}`,
		`{"level":"info","message":""}`,
		`{"level":"info","message":"a","x":"b"}`,
		`{"level":"info","message":"a\"b"}`,
		`{"level":"info","message":"a\\"}`,
		`{"level":"info","message":"tab	here"}`,
		`{"level":"info","message":"é"}`,
		`{"level":"info","message":"x"} `,
		`{"level":"info","message":"x"}}`,
		`{"level":"info","message":"}`,
		`{"level":"info","message":"`,
		`{"level":"loud","message":"x"}`,
		`{"level":"info","message":7}`,
		`{"level":"info","message":"x","level":"debug"}`,
		`{"message":"x","level":"info"}`,
		`{"level":"info", "message":"x"}`,
		`"}`, `}`, ``,
	}
	var o jsonobj.Obj
	for _, r := range reqs {
		level, msg, ok := readPlainLogRequest([]byte(r))
		if !ok {
			continue
		}
		lv, mv, err := readLogRequest(&o, []byte(r))
		if err != nil {
			t.Errorf("%s: the plain reader accepts what the parser refuses: %v", r, err)
			continue
		}
		ltext, _ := lv.Text()
		mtext, _ := mv.Text()
		if levels[ltext] != level || mtext != string(msg) {
			t.Errorf("%s: plain reader %v %q, parser %q %q", r, level, msg, ltext, mtext)
		}
	}
}

// FuzzPlainLogRequest: whatever a guest writes, the plain reader accepts
// only what the parser accepts, with the same level and message.
func FuzzPlainLogRequest(f *testing.F) {
	for _, s := range []string{`{"level":"info","message":"x"}`, `{"level":"warn","message":""}`,
		`{"level":"debug","message":"a\"b"}`, `{"level":"error","message":"}`, `"}`} {
		f.Add([]byte(s))
	}
	levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	f.Fuzz(func(t *testing.T, req []byte) {
		level, msg, ok := readPlainLogRequest(req)
		if !ok {
			return
		}
		var o jsonobj.Obj
		lv, mv, err := readLogRequest(&o, req)
		if err != nil {
			t.Fatalf("%q: the plain reader accepts what the parser refuses: %v", req, err)
		}
		ltext, _ := lv.Text()
		mtext, _ := mv.Text()
		if l, known := levels[ltext]; !known || l != level || mtext != string(msg) {
			t.Fatalf("%q: plain reader %v %q, parser %q %q", req, level, msg, ltext, mtext)
		}
	})
}

// BenchmarkLogRequest reads the log request hostfns/guest.Log writes, as
// hostLog does before it asks the logger: "plain" is the reader for the
// SDKs' shape, "parser" the general one every other request goes through.
func BenchmarkLogRequest(b *testing.B) {
	req := []byte(`{"level":"debug","message":"echo"}`)
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := readPlainLogRequest(req); !ok {
				b.Fatal("the SDK's request is not plain")
			}
		}
	})
	b.Run("parser", func(b *testing.B) {
		var o jsonobj.Obj
		var level []byte
		for b.Loop() {
			lv, _, err := readLogRequest(&o, req)
			if err != nil {
				b.Fatal(err)
			}
			level, _ = lv.AppendText(level[:0])
		}
	})
}
