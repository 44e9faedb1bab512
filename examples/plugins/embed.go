// Package plugins holds the author kits, one directory per language, and
// embeds their sources for `dsh-wasm plugin new`, which scaffolds a new
// plugin from them.
package plugins

import "embed"

// Kits holds each kit's sources and build script (not its node_modules).
//
//go:embed go/main.go go/build.sh c/dsh.h c/hello.c c/build.sh rust/hello.rs rust/build.sh as/dsh.ts as/hello.ts as/build.sh as/package.json as/package-lock.json
var Kits embed.FS

// Renames maps, per language, each name the example registers to the
// pattern of a new plugin's name; NAME stands for the new plugin's name.
var Renames = map[string][][2]string{
	"go": {{`"hello:greet"`, `"NAME:greet"`}, {`p.Variable("greeting"`, `p.Variable("NAME_greeting"`},
		{`{{greeting}}`, `{{NAME_greeting}}`}, {`with the greet tool`, `with the NAME_greet tool`},
		{`Name:        "greet"`, `Name:        "NAME_greet"`}, {`// Command hello is`, `// Command NAME is`},
		{`hello.wasm`, `NAME.wasm`}},
	"c": {{`c_greeting`, `NAME_greeting`}, {`c_reverse`, `NAME_reverse`}, {`c:hello`, `NAME:hello`},
		{`The C kit says`, `NAME says`}, {`hello.wasm`, `NAME.wasm`}},
	"rust": {{`rust_greeting`, `NAME_greeting`}, {`rust_words`, `NAME_words`}, {`rust:hello`, `NAME:hello`},
		{`The Rust kit says`, `NAME says`}, {`hello.wasm`, `NAME.wasm`}},
	"as": {{`as_greeting`, `NAME_greeting`}, {`as_upper`, `NAME_upper`}, {`as:hello`, `NAME:hello`},
		{`The AssemblyScript kit says`, `NAME says`}, {`hello.wasm`, `NAME.wasm`}, {`"dsh-wasm-as-kit"`, `"NAME"`}},
}

// Tools is each kit's example tool and an argument object for it.
var Tools = map[string][2]string{
	"go":   {"greet", `{"name":"Ann"}`},
	"c":    {"reverse", `{"text":"abc"}`},
	"rust": {"words", `{"text":"a b c"}`},
	"as":   {"upper", `{"text":"abc"}`},
}
