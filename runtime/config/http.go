package config

import (
	"encoding/json"
	"time"

	"gopkg.in/yaml.v3"
)

// HTTP bounds the connections of the HTTP servers a deployment runs
// (`dsh-wasm serve`, `dsh-wasm mcp --listen`), the file's top-level http
// section. Zero fields take the defaults; WithDefaults is where they are
// read.
//
//	http: {read_timeout: 30s, write_timeout: 30s, idle_timeout: 2m, max_connections: 1000}
type HTTP struct {
	// ReadTimeout bounds reading one request, its headers and body. A
	// connection that sends nothing is closed after it.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response: it is renewed at
	// every write, so a stream that keeps sending (an SSE turn) is never
	// cut, and a client that reads nothing is dropped.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request.
	IdleTimeout time.Duration
	// MaxConnections caps the open connections; past it the longest-idle
	// one is closed for the new one. It is kept below the process's
	// descriptor limit whatever is set (0: only that).
	MaxConnections int
}

// Defaults of HTTP.
const (
	DefaultHTTPReadTimeout  = 30 * time.Second
	DefaultHTTPWriteTimeout = 30 * time.Second
	DefaultHTTPIdleTimeout  = 2 * time.Minute
	MaxHTTPConnections      = 1 << 20
)

// WithDefaults is h with every zero timeout set to its default.
func (h HTTP) WithDefaults() HTTP {
	if h.ReadTimeout == 0 {
		h.ReadTimeout = DefaultHTTPReadTimeout
	}
	if h.WriteTimeout == 0 {
		h.WriteTimeout = DefaultHTTPWriteTimeout
	}
	if h.IdleTimeout == 0 {
		h.IdleTimeout = DefaultHTTPIdleTimeout
	}
	return h
}

func (d *decoder) http(n *yaml.Node, field string) HTTP {
	var h HTTP
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"read_timeout":  func(v *yaml.Node, f string) { h.ReadTimeout = d.duration(v, f) },
		"write_timeout": func(v *yaml.Node, f string) { h.WriteTimeout = d.duration(v, f) },
		"idle_timeout":  func(v *yaml.Node, f string) { h.IdleTimeout = d.duration(v, f) },
		"max_connections": func(v *yaml.Node, f string) {
			if i, ok := d.integer(v, f, 1, MaxHTTPConnections); ok {
				h.MaxConnections = i
			}
		},
	})
	return h
}

// MarshalJSON writes the durations as a person writes them.
func (h HTTP) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ReadTimeout    string `json:"read_timeout,omitempty"`
		WriteTimeout   string `json:"write_timeout,omitempty"`
		IdleTimeout    string `json:"idle_timeout,omitempty"`
		MaxConnections int    `json:"max_connections,omitempty"`
	}{durationText(h.ReadTimeout), durationText(h.WriteTimeout), durationText(h.IdleTimeout), h.MaxConnections})
}
