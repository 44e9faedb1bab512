package session

import (
	"errors"
	"testing"
)

// Reading arbitrary bytes fails cleanly or yields a log that re-encodes
// and derives messages without error; it never panics.
func FuzzParse(f *testing.F) {
	m := newMemLog(f, testHeader)
	script(1, true, m.emit)
	f.Add(m.String())
	f.Add(m.String()[:len(m.String())-7])
	f.Add(`{"type":"session","version":0,"id":"x","createdAt":0}` + "\n" +
		`{"type":"user/message","seq":0,"time":0,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":0,"end":0}}` + "\n")
	f.Add(`{"type":"session","version":0,"id":"x","createdAt":0}` + "\n" + `{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`)
	f.Fuzz(func(t *testing.T, data string) {
		st, rec, sound, err := parse([]byte(data), "fuzz", func() int64 { return 1 })
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("error not ErrCorrupt or ErrUnsupportedVersion: %v", err)
			}
			return
		}
		if sound > int64(len(data)) || (rec.TornLine == 0) != (sound == int64(len(data))) {
			t.Fatalf("sound %d of %d bytes, recovery %+v", sound, len(data), rec)
		}
		if _, err := st.header.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
		for _, e := range st.events {
			if _, err := e.MarshalJSON(); err != nil {
				t.Fatalf("event %d: %v", e.Seq, err)
			}
		}
		if _, err := Messages(st.events); err != nil {
			t.Fatalf("Messages of a loaded log: %v", err)
		}
	})
}
