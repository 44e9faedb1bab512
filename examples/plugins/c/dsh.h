/*
 * dsh.h — dsh:host/v1 for C plugins, in one header.
 *
 * Include it in exactly one .c file of your plugin: it defines the
 * dsh_abi_version and dsh_alloc exports. Build with wasi-libc as a reactor:
 *
 *   clang --target=wasm32-wasi -mexec-model=reactor -O2 -o plugin.wasm plugin.c
 *
 * (Debian: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32.)
 *
 * What it gives you (docs/ABI.md has the protocol it implements):
 *   - every host function of dsh:host/v1 as an import (dsh_hostfn_*), and
 *     dsh_call, which calls one and fetches an oversized reply with take;
 *   - dsh_ok / dsh_error / dsh_no_value, which pack an export's output;
 *   - dsh_split, which splits an export's NUL-separated input frame;
 *   - dsh_arg_string / dsh_arg_int / dsh_arg_bool, a small reader of the
 *     top-level members of a tool's JSON arguments;
 *   - dsh_buf, a growable string with JSON quoting, and helpers that
 *     register sections, variables and tools and write log lines.
 * You write dsh_init (and dsh_section / dsh_variable / dsh_tool for what
 * you register): see hello.c.
 */
#ifndef DSH_H
#define DSH_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DSH_IMPORT(name) __attribute__((import_module("dsh:host/v1"), import_name(name)))
#define DSH_EXPORT(name) __attribute__((export_name(name)))

/* Host functions: (in_ptr, in_len, out_ptr, out_cap) -> status << 32 | n. */
typedef uint64_t (*dsh_hostfn)(const char *in, uint32_t in_len, char *out, uint32_t out_cap);
#define DSH_HOSTFN(cname, wname) \
	DSH_IMPORT(wname) uint64_t cname(const char *in, uint32_t in_len, char *out, uint32_t out_cap);
DSH_HOSTFN(dsh_hostfn_log, "log")
DSH_HOSTFN(dsh_hostfn_section_register, "section_register")
DSH_HOSTFN(dsh_hostfn_section_unregister, "section_unregister")
DSH_HOSTFN(dsh_hostfn_variable_register, "variable_register")
DSH_HOSTFN(dsh_hostfn_variable_unregister, "variable_unregister")
DSH_HOSTFN(dsh_hostfn_tool_register, "tool_register")
DSH_HOSTFN(dsh_hostfn_tool_unregister, "tool_unregister")
DSH_HOSTFN(dsh_hostfn_event_subscribe, "event_subscribe")
DSH_HOSTFN(dsh_hostfn_event_emit, "event_emit")
DSH_HOSTFN(dsh_hostfn_capabilities_declare, "capabilities_declare")
DSH_HOSTFN(dsh_hostfn_state_get, "state_get")
DSH_HOSTFN(dsh_hostfn_state_set, "state_set")
DSH_HOSTFN(dsh_hostfn_env_get, "env_get")
DSH_HOSTFN(dsh_hostfn_exec_run, "exec_run")
DSH_HOSTFN(dsh_hostfn_exec_start, "exec_start")
DSH_HOSTFN(dsh_hostfn_exec_poll, "exec_poll")
DSH_HOSTFN(dsh_hostfn_exec_kill, "exec_kill")
DSH_HOSTFN(dsh_hostfn_http_request, "http_request")
/* take(ptr, n) copies a pending oversized reply; -1 if there is none. */
DSH_IMPORT("take") int32_t dsh_hostfn_take(char *ptr, uint32_t n);

/* Host status codes (the high 32 bits of a host function's result). */
enum {
	DSH_OK = 0, DSH_ERR_BAD_POINTER = 1, DSH_ERR_BAD_UTF8 = 2, DSH_ERR_BAD_JSON = 3,
	DSH_ERR_RULE = 4, DSH_ERR_DENIED = 5, DSH_ERR_NOT_FOUND = 6, DSH_ERR_TOO_LARGE = 7,
	DSH_ERR_LIMIT = 8, DSH_ERR_INTERNAL = 9, DSH_ERR_TIMEOUT = 10, DSH_ERR_CANCELED = 11
};

/* Output status bytes of an export. */
enum { DSH_OUT_OK = 0, DSH_OUT_ERROR = 1, DSH_OUT_NO_VALUE = 2 };

/* dsh_str is a view of bytes: not NUL-terminated, not owned. */
typedef struct { const char *p; uint32_t n; } dsh_str;

static inline dsh_str dsh_cstr(const char *s) { dsh_str r = {s, (uint32_t)strlen(s)}; return r; }
static inline int dsh_str_eq(dsh_str a, const char *b) { return a.n == strlen(b) && memcmp(a.p, b, a.n) == 0; }

/* ---- Growable strings ---------------------------------------------- */

/* dsh_buf is a growable byte string; zero-initialise it, dsh_buf_free it. */
typedef struct { char *p; uint32_t n, cap; } dsh_buf;

static inline void dsh_buf_put(dsh_buf *b, const char *s, uint32_t n) {
	if (b->n + n > b->cap) {
		uint32_t cap = b->cap ? b->cap : 64;
		while (cap < b->n + n) cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) abort();
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}
static inline void dsh_buf_puts(dsh_buf *b, const char *s) { dsh_buf_put(b, s, (uint32_t)strlen(s)); }
static inline void dsh_buf_free(dsh_buf *b) { free(b->p); b->p = 0; b->n = b->cap = 0; }

/* dsh_buf_quote appends s as a JSON string, quotes included. */
static inline void dsh_buf_quote(dsh_buf *b, const char *s, uint32_t n) {
	static const char hex[] = "0123456789abcdef";
	dsh_buf_put(b, "\"", 1);
	for (uint32_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			dsh_buf_put(b, e, 2);
		} else if (c == '\n') {
			dsh_buf_put(b, "\\n", 2);
		} else if (c < 0x20) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			dsh_buf_put(b, e, 6);
		} else {
			dsh_buf_put(b, (const char *)&s[i], 1);
		}
	}
	dsh_buf_put(b, "\"", 1);
}

/* ---- Calling host functions ------------------------------------------ */

/* dsh_reply is a host function's answer: status DSH_OK and the response
 * JSON, or an error status and its message. data is malloc'd (free it with
 * dsh_reply_free); it is NUL-terminated for convenience. */
typedef struct { uint32_t status; char *data; uint32_t len; } dsh_reply;

static inline void dsh_reply_free(dsh_reply *r) { free(r->data); r->data = 0; r->len = 0; }

/* dsh_call calls fn with the request and returns its reply, fetching it
 * with take when it is larger than the first buffer. */
static inline dsh_reply dsh_call(dsh_hostfn fn, const char *req, uint32_t len) {
	dsh_reply r = {0, 0, 0};
	uint32_t cap = 256;
	char *out = malloc(cap + 1);
	if (!out) abort();
	uint64_t res = fn(req, len, out, cap);
	r.status = (uint32_t)(res >> 32);
	r.len = (uint32_t)res;
	if (r.len > cap) {
		char *big = realloc(out, r.len + 1);
		if (!big) abort();
		out = big;
		if (dsh_hostfn_take(out, r.len) != (int32_t)r.len) {
			r.status = DSH_ERR_INTERNAL;
			static const char msg[] = "take: the reply was not there";
			r.len = sizeof msg - 1;
			memcpy(out, msg, r.len);
		}
	}
	out[r.len] = 0;
	r.data = out;
	return r;
}

/* dsh_log writes one log line at level "debug", "info", "warn" or "error". */
static inline void dsh_log(const char *level, const char *msg) {
	dsh_buf b = {0};
	dsh_buf_puts(&b, "{\"level\":");
	dsh_buf_quote(&b, level, (uint32_t)strlen(level));
	dsh_buf_puts(&b, ",\"message\":");
	dsh_buf_quote(&b, msg, (uint32_t)strlen(msg));
	dsh_buf_puts(&b, "}");
	dsh_reply r = dsh_call(dsh_hostfn_log, b.p, b.n);
	dsh_reply_free(&r);
	dsh_buf_free(&b);
}

/* dsh_register_section registers a static section (dynamic = 0) or a
 * dynamic one whose text dsh_section answers (dynamic = 1). */
static inline dsh_reply dsh_register_section(const char *name, int order, const char *text, int dynamic) {
	dsh_buf b = {0};
	char num[16];
	int i = 15, neg = order < 0;
	unsigned u = neg ? 0u - (unsigned)order : (unsigned)order;
	num[i] = 0;
	do { num[--i] = (char)('0' + u % 10); u /= 10; } while (u);
	if (neg) num[--i] = '-';
	dsh_buf_puts(&b, "{\"name\":");
	dsh_buf_quote(&b, name, (uint32_t)strlen(name));
	dsh_buf_puts(&b, ",\"order\":");
	dsh_buf_puts(&b, num + i);
	if (dynamic) {
		dsh_buf_puts(&b, ",\"dynamic\":true");
	} else {
		dsh_buf_puts(&b, ",\"text\":");
		dsh_buf_quote(&b, text, (uint32_t)strlen(text));
	}
	dsh_buf_puts(&b, "}");
	dsh_reply r = dsh_call(dsh_hostfn_section_register, b.p, b.n);
	dsh_buf_free(&b);
	return r;
}

/* dsh_register_variable registers a variable; dsh_variable answers it. */
static inline dsh_reply dsh_register_variable(const char *name) {
	dsh_buf b = {0};
	dsh_buf_puts(&b, "{\"name\":");
	dsh_buf_quote(&b, name, (uint32_t)strlen(name));
	dsh_buf_puts(&b, "}");
	dsh_reply r = dsh_call(dsh_hostfn_variable_register, b.p, b.n);
	dsh_buf_free(&b);
	return r;
}

/* dsh_register_tool registers a tool; parameters is its JSON Schema. */
static inline dsh_reply dsh_register_tool(const char *name, const char *description, const char *parameters) {
	dsh_buf b = {0};
	dsh_buf_puts(&b, "{\"name\":");
	dsh_buf_quote(&b, name, (uint32_t)strlen(name));
	dsh_buf_puts(&b, ",\"description\":");
	dsh_buf_quote(&b, description, (uint32_t)strlen(description));
	dsh_buf_puts(&b, ",\"parameters\":");
	dsh_buf_puts(&b, parameters);
	dsh_buf_puts(&b, "}");
	dsh_reply r = dsh_call(dsh_hostfn_tool_register, b.p, b.n);
	dsh_buf_free(&b);
	return r;
}

/* ---- Exports ------------------------------------------------------- */

DSH_EXPORT("dsh_abi_version") int32_t dsh_abi_version(void) { return 1; }

static char *dsh_in_;
static uint32_t dsh_in_cap_;

/* dsh_alloc: one input buffer, grown as needed; it stays put until the
 * next call, which is all the host needs. */
DSH_EXPORT("dsh_alloc") char *dsh_alloc(int32_t size) {
	if (size <= 0) return 0;
	if ((uint32_t)size > dsh_in_cap_) {
		char *p = realloc(dsh_in_, (uint32_t)size);
		if (!p) return 0; /* the host then fails the call */
		dsh_in_ = p;
		dsh_in_cap_ = (uint32_t)size;
	}
	return dsh_in_;
}

static dsh_buf dsh_out_;

/* dsh_output packs an export's output: a status byte and the payload,
 * valid until the next export call. */
static inline uint64_t dsh_output(uint8_t status, const char *payload, uint32_t n) {
	dsh_out_.n = 0;
	char st = (char)status;
	dsh_buf_put(&dsh_out_, &st, 1);
	if (n) dsh_buf_put(&dsh_out_, payload, n);
	return (uint64_t)(uintptr_t)dsh_out_.p << 32 | dsh_out_.n;
}
static inline uint64_t dsh_ok(const char *s) { return dsh_output(DSH_OUT_OK, s, (uint32_t)strlen(s)); }
static inline uint64_t dsh_okn(const char *s, uint32_t n) { return dsh_output(DSH_OUT_OK, s, n); }
static inline uint64_t dsh_error(const char *s) { return dsh_output(DSH_OUT_ERROR, s, (uint32_t)strlen(s)); }
static inline uint64_t dsh_no_value(void) { return dsh_output(DSH_OUT_NO_VALUE, 0, 0); }

/* dsh_fail turns a failed host call into an error output naming what. */
static inline uint64_t dsh_fail(const char *what, dsh_reply *r) {
	dsh_buf b = {0};
	dsh_buf_puts(&b, what);
	dsh_buf_puts(&b, ": ");
	dsh_buf_put(&b, r->data, r->len);
	uint64_t out = dsh_output(DSH_OUT_ERROR, b.p, b.n);
	dsh_buf_free(&b);
	dsh_reply_free(r);
	return out;
}

/* dsh_split splits an input frame at its first nfields-1 NUL bytes; the
 * last field is the rest. Missing fields are empty. */
static inline void dsh_split(const char *in, uint32_t len, dsh_str *fields, int nfields) {
	uint32_t start = 0;
	for (int f = 0; f < nfields; f++) {
		uint32_t end = start;
		if (f < nfields - 1)
			while (end < len && in[end] != 0) end++;
		else
			end = len;
		if (start > len) start = end = len;
		fields[f].p = in + start;
		fields[f].n = end - start;
		start = end + 1;
	}
}

/* ---- Reading tool arguments ------------------------------------------ */

/* Results of the argument readers. */
enum { DSH_ARG_OK = 0, DSH_ARG_MISSING = -1, DSH_ARG_TYPE = -2, DSH_ARG_SYNTAX = -3 };

static inline uint32_t dsh_json_ws_(dsh_str s, uint32_t i) {
	while (i < s.n && (s.p[i] == ' ' || s.p[i] == '\t' || s.p[i] == '\n' || s.p[i] == '\r')) i++;
	return i;
}

/* dsh_json_skip_ returns the index after the JSON value at i, or 0. */
static inline uint32_t dsh_json_skip_(dsh_str s, uint32_t i) {
	int depth = 0, in_str = 0;
	for (; i < s.n; i++) {
		char c = s.p[i];
		if (in_str) {
			if (c == '\\') i++;
			else if (c == '"') { in_str = 0; if (depth == 0) return i + 1; }
			continue;
		}
		if (c == '"') in_str = 1;
		else if (c == '{' || c == '[') depth++;
		else if (c == '}' || c == ']') { if (--depth == 0) return i + 1; if (depth < 0) return 0; }
		else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) return i;
	}
	return (depth == 0 && !in_str) ? i : 0;
}

/* dsh_arg finds the top-level member key of the JSON object args and
 * sets *val to its raw value. Empty arguments count as {}. */
static inline int dsh_arg(dsh_str args, const char *key, dsh_str *val) {
	uint32_t klen = (uint32_t)strlen(key);
	uint32_t i = dsh_json_ws_(args, 0);
	if (i == args.n) return DSH_ARG_MISSING; /* empty arguments: {} */
	if (args.p[i] != '{') return DSH_ARG_SYNTAX;
	i = dsh_json_ws_(args, i + 1);
	while (i < args.n && args.p[i] != '}') {
		if (args.p[i] != '"') return DSH_ARG_SYNTAX;
		uint32_t ks = i + 1, ke = dsh_json_skip_(args, i);
		if (!ke) return DSH_ARG_SYNTAX;
		i = dsh_json_ws_(args, ke);
		if (i >= args.n || args.p[i] != ':') return DSH_ARG_SYNTAX;
		uint32_t vs = dsh_json_ws_(args, i + 1), ve = dsh_json_skip_(args, vs);
		if (!ve || ve == vs) return DSH_ARG_SYNTAX;
		/* Keys are compared as written: an escaped key never matches. */
		if (ke - 1 - ks == klen && memcmp(args.p + ks, key, klen) == 0) {
			val->p = args.p + vs;
			val->n = ve - vs;
			return DSH_ARG_OK;
		}
		i = dsh_json_ws_(args, ve);
		if (i < args.n && args.p[i] == ',') i = dsh_json_ws_(args, i + 1);
	}
	return DSH_ARG_MISSING;
}

static inline int dsh_hex_(char c) {
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

static inline void dsh_utf8_(dsh_buf *b, uint32_t cp) {
	char u[4];
	uint32_t n;
	if (cp < 0x80) { u[0] = (char)cp; n = 1; }
	else if (cp < 0x800) { u[0] = (char)(0xc0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
	else if (cp < 0x10000) { u[0] = (char)(0xe0 | cp >> 12); u[1] = (char)(0x80 | (cp >> 6 & 0x3f)); u[2] = (char)(0x80 | (cp & 0x3f)); n = 3; }
	else { u[0] = (char)(0xf0 | cp >> 18); u[1] = (char)(0x80 | (cp >> 12 & 0x3f)); u[2] = (char)(0x80 | (cp >> 6 & 0x3f)); u[3] = (char)(0x80 | (cp & 0x3f)); n = 4; }
	dsh_buf_put(b, u, n);
}

/* dsh_arg_string decodes the string member key of args into out
 * (appended, NUL-terminated). */
static inline int dsh_arg_string(dsh_str args, const char *key, dsh_buf *out) {
	dsh_str v;
	int rc = dsh_arg(args, key, &v);
	if (rc) return rc;
	if (v.n < 2 || v.p[0] != '"') return DSH_ARG_TYPE;
	for (uint32_t i = 1; i < v.n - 1; i++) {
		char c = v.p[i];
		if (c != '\\') { dsh_buf_put(out, &c, 1); continue; }
		if (++i >= v.n - 1) return DSH_ARG_SYNTAX;
		switch (v.p[i]) {
		case '"': case '\\': case '/': dsh_buf_put(out, &v.p[i], 1); break;
		case 'b': dsh_buf_put(out, "\b", 1); break;
		case 'f': dsh_buf_put(out, "\f", 1); break;
		case 'n': dsh_buf_put(out, "\n", 1); break;
		case 'r': dsh_buf_put(out, "\r", 1); break;
		case 't': dsh_buf_put(out, "\t", 1); break;
		case 'u': {
			uint32_t cp = 0;
			for (int k = 0; k < 4; k++) {
				int h = i + 1 < v.n ? dsh_hex_(v.p[++i]) : -1;
				if (h < 0) return DSH_ARG_SYNTAX;
				cp = cp << 4 | (uint32_t)h;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < v.n && v.p[i + 1] == '\\' && v.p[i + 2] == 'u') {
				uint32_t lo = 0;
				int okh = 1;
				for (int k = 0; k < 4; k++) {
					int h = dsh_hex_(v.p[i + 3 + k]);
					if (h < 0) okh = 0;
					lo = lo << 4 | (uint32_t)(h < 0 ? 0 : h);
				}
				if (okh && lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					i += 6;
				}
			}
			if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd; /* a lone surrogate */
			dsh_utf8_(out, cp);
			break;
		}
		default: return DSH_ARG_SYNTAX;
		}
	}
	dsh_buf_put(out, "", 1);
	out->n--; /* keep the NUL out of the length */
	return DSH_ARG_OK;
}

/* dsh_arg_int reads the integer member key of args. */
static inline int dsh_arg_int(dsh_str args, const char *key, long long *out) {
	dsh_str v;
	int rc = dsh_arg(args, key, &v);
	if (rc) return rc;
	uint32_t i = 0;
	int neg = 0;
	long long x = 0;
	if (v.n && v.p[0] == '-') { neg = 1; i = 1; }
	if (i == v.n) return DSH_ARG_TYPE;
	for (; i < v.n; i++) {
		if (v.p[i] < '0' || v.p[i] > '9') return DSH_ARG_TYPE;
		x = x * 10 + (v.p[i] - '0');
	}
	*out = neg ? -x : x;
	return DSH_ARG_OK;
}

/* dsh_arg_bool reads the boolean member key of args. */
static inline int dsh_arg_bool(dsh_str args, const char *key, int *out) {
	dsh_str v;
	int rc = dsh_arg(args, key, &v);
	if (rc) return rc;
	if (dsh_str_eq(v, "true")) { *out = 1; return DSH_ARG_OK; }
	if (dsh_str_eq(v, "false")) { *out = 0; return DSH_ARG_OK; }
	return DSH_ARG_TYPE;
}

/* dsh_arg_error is the message for a reader's failure. */
static inline const char *dsh_arg_error(int rc) {
	switch (rc) {
	case DSH_ARG_MISSING: return "missing argument";
	case DSH_ARG_TYPE: return "argument of the wrong type";
	default: return "arguments are not a JSON object";
	}
}

#endif /* DSH_H */
