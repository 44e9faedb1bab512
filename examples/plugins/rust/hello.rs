//! hello is the Rust kit's example plugin: crate-free, on plain
//! `extern "C"` imports of dsh:host/v1. It registers a section that uses a
//! variable, the variable, and a tool that counts words. Build it with
//! ./build.sh (Debian: apt-get install rustc libstd-rust-dev-wasm32).

use std::fmt::Write;

// Every host function but take: (in_ptr, in_len, out_ptr, out_cap) -> status << 32 | n.
#[link(wasm_import_module = "dsh:host/v1")]
extern "C" {
    #[link_name = "log"]
    fn host_log(in_ptr: *const u8, in_len: u32, out_ptr: *mut u8, out_cap: u32) -> u64;
    fn section_register(in_ptr: *const u8, in_len: u32, out_ptr: *mut u8, out_cap: u32) -> u64;
    fn variable_register(in_ptr: *const u8, in_len: u32, out_ptr: *mut u8, out_cap: u32) -> u64;
    fn tool_register(in_ptr: *const u8, in_len: u32, out_ptr: *mut u8, out_cap: u32) -> u64;
    fn take(ptr: *mut u8, n: u32) -> i32;
}

type HostFn = unsafe extern "C" fn(*const u8, u32, *mut u8, u32) -> u64;

/// call calls a host function and returns its status and payload; a
/// payload larger than the first buffer is fetched with take.
fn call(f: HostFn, req: &str) -> (u32, String) {
    let mut out = vec![0u8; 256];
    let r = unsafe { f(req.as_ptr(), req.len() as u32, out.as_mut_ptr(), out.len() as u32) };
    let (status, n) = ((r >> 32) as u32, r as u32 as usize);
    if n > out.len() {
        out = vec![0u8; n];
        if unsafe { take(out.as_mut_ptr(), n as u32) } != n as i32 {
            return (9, "take: the reply was not there".to_string());
        }
    }
    out.truncate(n);
    (status, String::from_utf8_lossy(&out).into_owned())
}

/// quote returns s as a JSON string.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn log(level: &str, msg: &str) {
    let req = format!("{{\"level\":{},\"message\":{}}}", quote(level), quote(msg));
    call(host_log, &req);
}

// Buffers the host reads and writes; the host runs one call at a time.
static mut INPUT: Vec<u8> = Vec::new();
static mut OUTPUT: Vec<u8> = Vec::new();

#[export_name = "dsh_abi_version"]
pub extern "C" fn dsh_abi_version() -> i32 {
    1
}

/// dsh_alloc hands out one input buffer, grown as needed; it stays put
/// until the next call.
#[export_name = "dsh_alloc"]
pub extern "C" fn dsh_alloc(size: i32) -> *mut u8 {
    unsafe {
        if INPUT.len() < size as usize {
            INPUT.resize(size as usize, 0);
        }
        INPUT.as_mut_ptr()
    }
}

/// output packs a status byte and the payload: ptr << 32 | len.
fn output(status: u8, payload: &str) -> u64 {
    unsafe {
        OUTPUT.clear();
        OUTPUT.push(status);
        OUTPUT.extend_from_slice(payload.as_bytes());
        (OUTPUT.as_ptr() as u64) << 32 | OUTPUT.len() as u64
    }
}

fn input<'a>(ptr: *const u8, len: u32) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(ptr, len as usize) }
}

/// frame splits an input at its first n-1 NULs; the last field is the rest.
fn frame(b: &[u8], n: usize) -> Vec<&[u8]> {
    b.splitn(n, |&c| c == 0).collect()
}

#[export_name = "dsh_init"]
pub extern "C" fn dsh_init(_ptr: *const u8, _len: u32) -> u64 {
    let regs: [(HostFn, &str); 3] = [
        (variable_register, r#"{"name":"rust_greeting"}"#),
        (section_register, r#"{"name":"rust:hello","order":160,"text":"The Rust kit says {{rust_greeting}}. Count words with rust_words."}"#),
        (tool_register, r#"{"name":"rust_words","description":"Count the words of a text.","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}"#),
    ];
    for (f, req) in regs {
        let (status, msg) = call(f, req);
        if status != 0 {
            return output(1, &msg);
        }
    }
    0
}

#[export_name = "dsh_variable"]
pub extern "C" fn dsh_variable(_ptr: *const u8, _len: u32) -> u64 {
    output(0, "hello from Rust")
}

#[export_name = "dsh_tool"]
pub extern "C" fn dsh_tool(ptr: *const u8, len: u32) -> u64 {
    let f = frame(input(ptr, len), 3);
    if f[0] != b"rust_words" {
        return output(1, "unknown tool");
    }
    let args = if f.len() == 3 { f[2] } else { &[] };
    match arg_string(args, "text") {
        Ok(text) => {
            log("debug", "rust_words done");
            output(0, &text.split_whitespace().count().to_string())
        }
        Err(e) => output(1, &format!("argument \"text\": {}", e)),
    }
}

// ---- A small reader of a tool's JSON arguments ----------------------------

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// skip returns the index after the JSON value at i.
fn skip(b: &[u8], mut i: usize) -> Option<usize> {
    let (mut depth, mut in_str) = (0i32, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_str = false;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
        } else if c == b'"' {
            in_str = true;
        } else if c == b'{' || c == b'[' {
            depth += 1;
        } else if c == b'}' || c == b']' {
            depth -= 1;
            if depth == 0 {
                return Some(i + 1);
            }
            if depth < 0 {
                return None;
            }
        } else if depth == 0 && matches!(c, b',' | b' ' | b'\t' | b'\n' | b'\r') {
            return Some(i);
        }
        i += 1;
    }
    if depth == 0 && !in_str {
        Some(i)
    } else {
        None
    }
}

/// arg_string decodes the string member key of the JSON object args
/// (empty arguments count as {}).
fn arg_string(args: &[u8], key: &str) -> Result<String, &'static str> {
    let bad = "arguments are not a JSON object";
    let mut i = ws(args, 0);
    if i == args.len() {
        return Err("missing");
    }
    if args[i] != b'{' {
        return Err(bad);
    }
    i = ws(args, i + 1);
    while i < args.len() && args[i] != b'}' {
        if args[i] != b'"' {
            return Err(bad);
        }
        let ke = skip(args, i).ok_or(bad)?;
        let k = &args[i + 1..ke - 1];
        i = ws(args, ke);
        if i >= args.len() || args[i] != b':' {
            return Err(bad);
        }
        let vs = ws(args, i + 1);
        let ve = skip(args, vs).ok_or(bad)?;
        if k == key.as_bytes() {
            return unquote(&args[vs..ve]);
        }
        i = ws(args, ve);
        if i < args.len() && args[i] == b',' {
            i = ws(args, i + 1);
        }
    }
    Err("missing")
}

fn unquote(v: &[u8]) -> Result<String, &'static str> {
    if v.len() < 2 || v[0] != b'"' {
        return Err("want a string");
    }
    let s = std::str::from_utf8(&v[1..v.len() - 1]).map_err(|_| "not UTF-8")?;
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => {
                let hex = |chars: &mut std::str::Chars| -> Option<u32> {
                    let h: String = chars.by_ref().take(4).collect();
                    u32::from_str_radix(&h, 16).ok()
                };
                let mut cp = hex(&mut chars).ok_or("bad \\u escape")?;
                if (0xd800..0xdc00).contains(&cp) {
                    let rest = chars.as_str();
                    if rest.starts_with("\\u") {
                        let mut look = rest[2..].chars();
                        if let Some(lo) = hex(&mut look) {
                            if (0xdc00..0xe000).contains(&lo) {
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                chars = look;
                            }
                        }
                    }
                }
                out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
            }
            _ => return Err("bad escape"),
        }
    }
    Ok(out)
}
