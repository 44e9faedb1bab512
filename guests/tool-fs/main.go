//go:build wasip1

// Command tool-fs is dsh-wasm's built-in file tools plugin, loaded as
// builtin:tool-fs. It registers read, write and edit with the reference
// harness's names and parameters, and their guidance sections tool:read
// (100), tool:write (101) and tool:edit (102).
//
// Files are reached through WASI only, inside the fs jail the host mounts
// for the plugin's grants. A relative path is relative to the agent's
// working directory; an absolute path must lie inside a granted root.
// Results name the file as the model did.
//
// Policy, kept in the plugin's host-side state for the agent's session:
// writing over or editing a file is refused unless this session read it
// (or created or changed it) and it has not changed on disk since; the
// version check runs again right before the new content replaces the old.
//
// Config (all optional): read_limit (2000 lines), max_line_length (2000
// characters), max_bytes (50 KiB of lines per read), max_read_file_bytes
// (1 GiB: larger files are refused by read, which streams),
// max_edit_file_bytes (64 MiB: edit and write hold the file in memory).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

func main() {}

func init() { guest.Main(setup) }

type config struct {
	ReadLimit        int   `json:"read_limit"`
	MaxLineLength    int   `json:"max_line_length"`
	MaxBytes         int   `json:"max_bytes"`
	MaxReadFileBytes int64 `json:"max_read_file_bytes"`
	MaxEditFileBytes int64 `json:"max_edit_file_bytes"`
}

var cfg = config{
	ReadLimit:        2000,
	MaxLineLength:    2000,
	MaxBytes:         50 * 1024,
	MaxReadFileBytes: 1 << 30,
	MaxEditFileBytes: 64 << 20,
}

func parseConfig(raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&cfg); err != nil {
		return fmt.Errorf("tool-fs config: %w", err)
	}
	for name, v := range map[string]int64{"read_limit": int64(cfg.ReadLimit), "max_line_length": int64(cfg.MaxLineLength),
		"max_bytes": int64(cfg.MaxBytes), "max_read_file_bytes": cfg.MaxReadFileBytes, "max_edit_file_bytes": cfg.MaxEditFileBytes} {
		if v < 1 {
			return fmt.Errorf("tool-fs config: %s must be a positive integer, not %d", name, v)
		}
	}
	return nil
}

const (
	readSection  = "Use the read tool, not shell commands like cat, head or tail, to look at text files: it numbers the lines and pages through large files with offset and limit. Read a file before you edit or overwrite it."
	writeSection = "Use the write tool to create a file or to replace all of its content. An existing file must have been read in this session first, and it is refused if it changed on disk since; prefer edit for changes to part of a file."
	editSection  = "Use the edit tool for targeted changes: it replaces old_string, literally, with new_string. old_string must occur exactly once unless replace_all is true; when it occurs several times, add surrounding lines to make it unique. Read the file first in this session; a file changed on disk since that read must be read again."
)

func setup(p *guest.Plugin) error {
	if err := parseConfig(p.Config); err != nil {
		return err
	}
	if err := p.Need(hostfns.Capabilities{FS: []hostfns.FSNeed{{Path: "workspace", Mode: "ro"}}}); err != nil {
		return err
	}
	for _, s := range []struct {
		name  string
		order int
		text  string
	}{{"tool:read", 100, readSection}, {"tool:write", 101, writeSection}, {"tool:edit", 102, editSection}} {
		if err := p.Section(s.name, s.order, s.text); err != nil {
			return err
		}
	}
	if err := p.ToolArgs(guest.Tool{
		Name:        "read",
		Description: fmt.Sprintf("Read a UTF-8 text file. Lines come back numbered from 1, at most %d per call, followed by a note that says how to continue or that the file ended. Binary files are refused.", cfg.ReadLimit),
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"file_path":{"type":"string","description":"The file to read: relative to the working directory, or absolute inside it."},`+
			`"offset":{"type":"number","description":"The first line to return, from 1. Defaults to 1."},`+
			`"limit":{"type":"number","description":"How many lines to return. Defaults to %d, the most allowed."}},`+
			`"required":["file_path"],"additionalProperties":false}`, cfg.ReadLimit)),
	}, readTool); err != nil {
		return err
	}
	if err := p.ToolArgs(guest.Tool{
		Name:        "write",
		Description: "Create a UTF-8 text file, or replace all of an existing file's content. An existing file must have been read first in this session.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"file_path":{"type":"string","description":"The file to write: relative to the working directory, or absolute inside it."},` +
			`"content":{"type":"string","description":"The whole new content of the file."}},` +
			`"required":["file_path","content"],"additionalProperties":false}`),
	}, writeTool); err != nil {
		return err
	}
	return p.ToolArgs(guest.Tool{
		Name:        "edit",
		Description: "Change an existing UTF-8 text file by replacing literal text. old_string must match exactly, including whitespace, and only once unless replace_all is true. The file must have been read first in this session.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"file_path":{"type":"string","description":"The file to edit: relative to the working directory, or absolute inside it."},` +
			`"old_string":{"type":"string","description":"The exact text to replace."},` +
			`"new_string":{"type":"string","description":"The text to put in its place; empty deletes it."},` +
			`"replace_all":{"type":"boolean","description":"Replace every occurrence. Defaults to false, when old_string must occur exactly once."}},` +
			`"required":["file_path","old_string","new_string"],"additionalProperties":false}`),
	}, editTool)
}
