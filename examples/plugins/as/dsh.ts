// dsh.ts: small AssemblyScript bindings of dsh:host/v1, our own. Import
// from your entry file and export dsh_abi_version and dsh_alloc from it:
//
//   export { dsh_abi_version, dsh_alloc } from "./dsh";
//
// Buffers the host reads or writes are ArrayBuffers held in globals, so
// the garbage collector (which does not move objects) keeps them until
// they are replaced at the next call.

// Every host function but take: (in_ptr, in_len, out_ptr, out_cap) -> status << 32 | n.
@external("dsh:host/v1", "log")
declare function hostLog(inPtr: usize, inLen: i32, outPtr: usize, outCap: i32): i64;
@external("dsh:host/v1", "section_register")
declare function hostSectionRegister(inPtr: usize, inLen: i32, outPtr: usize, outCap: i32): i64;
@external("dsh:host/v1", "variable_register")
declare function hostVariableRegister(inPtr: usize, inLen: i32, outPtr: usize, outCap: i32): i64;
@external("dsh:host/v1", "tool_register")
declare function hostToolRegister(inPtr: usize, inLen: i32, outPtr: usize, outCap: i32): i64;
@external("dsh:host/v1", "take")
declare function hostTake(ptr: usize, n: i32): i32;

// Output status bytes.
export const OUT_OK: u8 = 0;
export const OUT_ERROR: u8 = 1;
export const OUT_NO_VALUE: u8 = 2;

// Reply is a host function's answer: status 0 and the response JSON, or
// an error status and its message.
export class Reply {
  constructor(public status: u32, public text: string) {}
}

// The functions call can reach.
export enum Fn {
  Log,
  SectionRegister,
  VariableRegister,
  ToolRegister,
}

function raw(fn: Fn, inPtr: usize, inLen: i32, outPtr: usize, outCap: i32): i64 {
  switch (fn) {
    case Fn.Log: return hostLog(inPtr, inLen, outPtr, outCap);
    case Fn.SectionRegister: return hostSectionRegister(inPtr, inLen, outPtr, outCap);
    case Fn.VariableRegister: return hostVariableRegister(inPtr, inLen, outPtr, outCap);
    default: return hostToolRegister(inPtr, inLen, outPtr, outCap);
  }
}

// call sends request (JSON) to fn; a reply larger than the first buffer
// is fetched with take.
export function call(fn: Fn, request: string): Reply {
  const req = String.UTF8.encode(request);
  let out = new ArrayBuffer(256);
  const r = raw(fn, changetype<usize>(req), req.byteLength, changetype<usize>(out), out.byteLength);
  const status = <u32>(r >>> 32);
  const n = <i32>(r & 0xffffffff);
  if (n > out.byteLength) {
    out = new ArrayBuffer(n);
    if (hostTake(changetype<usize>(out), n) != n) return new Reply(9, "take: the reply was not there");
  }
  return new Reply(status, String.UTF8.decodeUnsafe(changetype<usize>(out), n));
}

// quote returns s as a JSON string.
export function quote(s: string): string {
  let q = "\"";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) q += "\\\"";
    else if (c == 0x5c) q += "\\\\";
    else if (c == 0x0a) q += "\\n";
    else if (c < 0x20) q += "\\u00" + (c < 0x10 ? "0" : "") + c.toString(16);
    else q += String.fromCharCode(c);
  }
  return q + "\"";
}

export function log(level: string, message: string): void {
  call(Fn.Log, "{\"level\":" + quote(level) + ",\"message\":" + quote(message) + "}");
}

export function registerSection(name: string, order: i32, text: string): Reply {
  return call(Fn.SectionRegister, "{\"name\":" + quote(name) + ",\"order\":" + order.toString() + ",\"text\":" + quote(text) + "}");
}

export function registerVariable(name: string): Reply {
  return call(Fn.VariableRegister, "{\"name\":" + quote(name) + "}");
}

export function registerTool(name: string, description: string, parametersJSON: string): Reply {
  return call(Fn.ToolRegister, "{\"name\":" + quote(name) + ",\"description\":" + quote(description) + ",\"parameters\":" + parametersJSON + "}");
}

export function dsh_abi_version(): i32 {
  return 1;
}

let input = new ArrayBuffer(0);

// dsh_alloc: one input buffer, replaced when too small.
export function dsh_alloc(size: i32): usize {
  if (size > input.byteLength) input = new ArrayBuffer(size);
  return changetype<usize>(input);
}

let output = new ArrayBuffer(0);

// result packs an export's output: a status byte, then the payload.
export function result(status: u8, payload: string): i64 {
  const p = String.UTF8.encode(payload);
  output = new ArrayBuffer(p.byteLength + 1);
  store<u8>(changetype<usize>(output), status);
  memory.copy(changetype<usize>(output) + 1, changetype<usize>(p), p.byteLength);
  return (<i64>changetype<usize>(output) << 32) | <i64>output.byteLength;
}

// Frame is an export's input split at NUL bytes: name, context and, for
// tools and events, the arguments or payload.
export class Frame {
  constructor(public name: string, public context: string, public rest: string) {}
}

// frame splits the input at ptr into at most three fields.
export function frame(ptr: usize, len: i32): Frame {
  const f = ["", "", ""];
  let start = 0;
  let field = 0;
  for (let i = 0; i < len && field < 2; i++) {
    if (load<u8>(ptr + i) == 0) {
      f[field++] = String.UTF8.decodeUnsafe(ptr + start, i - start);
      start = i + 1;
    }
  }
  f[field] = String.UTF8.decodeUnsafe(ptr + start, len - start);
  return new Frame(f[0], f[1], f[2]);
}

// abort answers the compiler's abort calls (--use abort=dsh/abort): the
// host refuses modules that import env.abort.
export function abort(message: usize, file: usize, line: u32, column: u32): void {
  unreachable();
}
