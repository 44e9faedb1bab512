// hello is the AssemblyScript kit's example plugin: a section that uses a
// variable, the variable, and a tool that upper-cases text. Its arguments
// are decoded with json-as. Build it with ./build.sh.
import { JSON } from "json-as";
import { Frame, OUT_ERROR, OUT_OK, frame, log, registerSection, registerTool, registerVariable, result } from "./dsh";
export { dsh_abi_version, dsh_alloc } from "./dsh";

@json
class UpperArgs {
  text: string = "";
}

export function dsh_init(ptr: usize, len: i32): i64 {
  let r = registerVariable("as_greeting");
  if (r.status != 0) return result(OUT_ERROR, r.text);
  r = registerSection("as:hello", 170, "The AssemblyScript kit says {{as_greeting}}. Shout with as_upper.");
  if (r.status != 0) return result(OUT_ERROR, r.text);
  r = registerTool("as_upper", "Upper-case a text.",
    "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}");
  if (r.status != 0) return result(OUT_ERROR, r.text);
  return 0;
}

export function dsh_variable(ptr: usize, len: i32): i64 {
  return result(OUT_OK, "hello from AssemblyScript");
}

export function dsh_tool(ptr: usize, len: i32): i64 {
  const f: Frame = frame(ptr, len);
  if (f.name != "as_upper") return result(OUT_ERROR, "unknown tool " + f.name);
  // Empty arguments count as {}.
  const args = JSON.parse<UpperArgs>(f.rest.length == 0 ? "{}" : f.rest);
  log("debug", "as_upper done");
  return result(OUT_OK, args.text.toUpperCase());
}
