;; A community plugin shaped like one built with the Rust extism-pdk for
;; hyper-mcp. Its imports are exactly those the Rust PDK declares in
;; extism:host/env (extism/rust-pdk src/extism.rs at 17429445) and the
;; host_fn! set of hyper-mcp's src/service.rs (tuananh/hyper-mcp at
;; f3e1aff5) in extism:host/user, with their signatures (PTR is i64). It
;; moves data as the Rust PDK does: input read 8 bytes per input_load_u64,
;; output written 8 bytes per store_u64 into a block from alloc.
;;
;; Exports both ABIs' functions: describe/call (v1) and list_tools/call_tool
;; (v2); the host is told which with the entry's abi key. The tool
;; wat_echo answers {"content":[{"type":"text","text":"wat ok"}],"echo":INPUT}.
;; list_tools and call_tool refuse an empty input, as real v2 plugins do.
;; Built with wat2wasm at test time; no .wasm is committed.
(module
  (import "extism:host/env" "input_length" (func $input_length  (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "length_unsafe" (func $length_unsafe (param i64) (result i64)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "free" (func $free (param i64) ))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64) ))
  (import "extism:host/env" "error_set" (func $error_set (param i64) ))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32) ))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64) ))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64) ))
  (import "extism:host/env" "http_request" (func $http_request (param i64 i64) (result i64)))
  (import "extism:host/env" "http_status_code" (func $http_status_code  (result i32)))
  (import "extism:host/env" "http_headers" (func $http_headers  (result i64)))
  (import "extism:host/env" "log_info" (func $log_info (param i64) ))
  (import "extism:host/env" "log_debug" (func $log_debug (param i64) ))
  (import "extism:host/env" "log_warn" (func $log_warn (param i64) ))
  (import "extism:host/env" "log_error" (func $log_error (param i64) ))
  (import "extism:host/env" "log_trace" (func $log_trace (param i64) ))
  (import "extism:host/env" "get_log_level" (func $get_log_level  (result i32)))
  (import "extism:host/user" "create_elicitation" (func $create_elicitation (param i64) (result i64)))
  (import "extism:host/user" "create_message" (func $create_message (param i64) (result i64)))
  (import "extism:host/user" "list_roots" (func $list_roots  (result i64)))
  (import "extism:host/user" "notify_logging_message" (func $notify_logging_message (param i64) ))
  (import "extism:host/user" "notify_progress" (func $notify_progress (param i64) ))
  (import "extism:host/user" "notify_prompt_list_changed" (func $notify_prompt_list_changed  ))
  (import "extism:host/user" "notify_resource_list_changed" (func $notify_resource_list_changed  ))
  (import "extism:host/user" "notify_resource_updated" (func $notify_resource_updated (param i64) ))
  (import "extism:host/user" "notify_tool_list_changed" (func $notify_tool_list_changed  ))
  (memory (export "memory") 1)
  ;; describe's output at 0; the echo prefix just before BUF (8192), where
  ;; the input is copied, so prefix + input + "}" is contiguous.
  (data (i32.const 0) "{\"tools\":[{\"name\":\"wat_echo\",\"description\":\"Echo through the Rust PDK imports.\",\"inputSchema\":{\"type\":\"object\"}}]}")
  (data (i32.const 8140) "{\"content\":[{\"type\":\"text\",\"text\":\"wat ok\"}],\"echo\":")
  (data (i32.const 4000) "missing context")

  ;; emit copies guest memory [ptr, ptr+len) into a new kernel block, as the
  ;; Rust PDK's Memory::store does, and returns its offset.
  (func $emit (param $ptr i32) (param $len i64) (result i64)
    (local $off i64) (local $i i64)
    (local.set $off (call $alloc (local.get $len)))
    (block $done
      (loop $words
        (br_if $done (i64.gt_u (i64.add (local.get $i) (i64.const 8)) (local.get $len)))
        (call $store_u64 (i64.add (local.get $off) (local.get $i))
          (i64.load (i32.add (local.get $ptr) (i32.wrap_i64 (local.get $i)))))
        (local.set $i (i64.add (local.get $i) (i64.const 8)))
        (br $words)))
    (block $done
      (loop $bytes
        (br_if $done (i64.ge_u (local.get $i) (local.get $len)))
        (call $store_u8 (i64.add (local.get $off) (local.get $i))
          (i32.load8_u (i32.add (local.get $ptr) (i32.wrap_i64 (local.get $i)))))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $bytes)))
    (local.get $off))

  ;; load_input copies the input to BUF as the Rust PDK's load_input does and
  ;; returns its length.
  (func $load_input (result i64)
    (local $n i64) (local $i i64)
    (local.set $n (call $input_length))
    (block $done
      (loop $words
        (br_if $done (i64.gt_u (i64.add (local.get $i) (i64.const 8)) (local.get $n)))
        (i64.store (i32.add (i32.const 8192) (i32.wrap_i64 (local.get $i))) (call $input_load_u64 (local.get $i)))
        (local.set $i (i64.add (local.get $i) (i64.const 8)))
        (br $words)))
    (block $done
      (loop $bytes
        (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
        (i32.store8 (i32.add (i32.const 8192) (i32.wrap_i64 (local.get $i))) (call $input_load_u8 (local.get $i)))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $bytes)))
    (local.get $n))

  (func $tools (result i32)
    (call $output_set (call $emit (i32.const 0) (i64.const 114)) (i64.const 114))
    (i32.const 0))

  (func $echo (result i32)
    (local $n i64) (local $total i64)
    (local.set $n (call $load_input))
    (i32.store8 (i32.add (i32.const 8192) (i32.wrap_i64 (local.get $n))) (i32.const 125))
    (local.set $total (i64.add (local.get $n) (i64.const 53)))
    (call $output_set (call $emit (i32.const 8140) (local.get $total)) (local.get $total))
    (i32.const 0))

  (func $need_input (result i32)
    (if (i64.eqz (call $input_length))
      (then
        (call $error_set (call $emit (i32.const 4000) (i64.const 15)))
        (return (i32.const 0))))
    (i32.const 1))

  (func (export "describe") (result i32) (call $tools))
  (func (export "call") (result i32) (call $echo))
  (func (export "list_tools") (result i32)
    (if (i32.eqz (call $need_input)) (then (return (i32.const 1))))
    (call $tools))
  (func (export "call_tool") (result i32)
    (if (i32.eqz (call $need_input)) (then (return (i32.const 1))))
    (call $echo)))
