package dsh

import (
	"fmt"
	"log/slog"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// hostLog is on the hot path of many tools, so it reads its request with
// package jsonobj, as strictly as decode but without reflection; and the
// request the SDKs write, with a plain message, without even that. Its
// level is known before its message is decoded, so a record the logger
// would drop costs only the check that the request is well formed.
func hostLog(h Host, req []byte) ([]byte, hostfns.Status, string) {
	level, plain, ok := readPlainLogRequest(req)
	var mv jsonobj.Value
	if !ok {
		sc := h.Scratch()
		lv, v, err := readLogRequest(&sc.Req, req)
		if err != nil {
			return nil, hostfns.ErrBadJSON, fmt.Sprintf("bad request: %v", err)
		}
		sc.Buf, _ = lv.AppendText(sc.Buf[:0]) // empty when absent
		level = slog.LevelInfo
		switch string(sc.Buf) {
		case "debug":
			level = slog.LevelDebug
		case "info", "":
		case "warn":
			level = slog.LevelWarn
		case "error":
			level = slog.LevelError
		default:
			return nil, hostfns.ErrBadJSON, fmt.Sprintf("unknown level %q (want debug, info, warn or error)", sc.Buf)
		}
		mv = v
	}
	if !h.Logger().Enabled(h.Context(), level) {
		return nil, 0, "" // checked, and not worth decoding
	}
	var msg string
	if ok {
		msg = string(plain)
	} else {
		msg, _ = mv.Text() // "" when absent
	}
	const maxLog = 64 << 10
	if len(msg) > maxLog {
		msg = msg[:maxLog] + "…(truncated)"
	}
	h.RateLog(len(msg), func() { h.Logger().Log(h.Context(), level, msg) })
	return nil, 0, ""
}

// plainLogLevels are the prefixes of the log requests readPlainLogRequest
// reads, as the SDKs write them, and their levels.
var plainLogLevels = [...]struct {
	prefix string
	level  slog.Level
}{
	{`{"level":"debug","message":"`, slog.LevelDebug},
	{`{"level":"info","message":"`, slog.LevelInfo},
	{`{"level":"warn","message":"`, slog.LevelWarn},
	{`{"level":"error","message":"`, slog.LevelError},
}

// readPlainLogRequest reads a log request of exactly the form
// {"level":"<level>","message":"<message>"} whose message is plain ASCII
// (no quote, backslash or control character): such a request is valid,
// and its message needs no decoding. ok is false for any other request,
// which readLogRequest then reads; for those it accepts, both readers give
// the same level and message.
func readPlainLogRequest(req []byte) (level slog.Level, msg []byte, ok bool) {
	if len(req) < 2 || req[len(req)-2] != '"' || req[len(req)-1] != '}' {
		return 0, nil, false
	}
	for _, l := range plainLogLevels {
		if len(req) < len(l.prefix)+2 || string(req[:len(l.prefix)]) != l.prefix {
			continue
		}
		msg = req[len(l.prefix) : len(req)-2]
		for _, c := range msg {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				return 0, nil, false
			}
		}
		return l.level, msg, true
	}
	return 0, nil, false
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
