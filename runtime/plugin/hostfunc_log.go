package plugin

import (
	"fmt"
	"log/slog"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// hostLog is on the hot path of many tools, so it reads its request with
// package jsonobj, as strictly as decode but without reflection.
func hostLog(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	lv, mv, err := readLogRequest(&in.req, req)
	if err != nil {
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("bad request: %v", err)
	}
	in.scratch, _ = lv.AppendText(in.scratch[:0]) // empty when absent
	level := slog.LevelInfo
	switch string(in.scratch) {
	case "debug":
		level = slog.LevelDebug
	case "info", "":
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("unknown level %q (want debug, info, warn or error)", in.scratch)
	}
	if !in.p.log.Enabled(cs.ctx, level) {
		return nil, 0, "" // checked, and not worth decoding
	}
	msg, _ := mv.Text() // "" when absent
	const maxLog = 64 << 10
	if len(msg) > maxLog {
		msg = msg[:maxLog] + "…(truncated)"
	}
	in.p.rateLog(len(msg), func() { in.p.log.Log(cs.ctx, level, msg) })
	return nil, 0, ""
}

// readLogRequest parses a hostfns.LogRequest into r as strictly as
// decode: an object with no other members, both strings or absent.
func readLogRequest(r *jsonobj.Obj, req []byte) (level, msg jsonobj.Value, err error) {
	if err = r.Parse(req); err == nil {
		err = r.Only("level", "message")
	}
	if err == nil {
		level, err = stringMember(r, "level")
	}
	if err == nil {
		msg, err = stringMember(r, "message")
	}
	return level, msg, err
}

// stringMember returns member name of o if it is a string; absent and
// null give the zero Value, whose text is empty.
func stringMember(o *jsonobj.Obj, name string) (jsonobj.Value, error) {
	v, ok := o.Lookup(name)
	if !ok || v.Kind() == jsonobj.Null {
		return jsonobj.Value{}, nil
	}
	if v.Kind() != jsonobj.String {
		_, err := v.Text()
		return v, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}
