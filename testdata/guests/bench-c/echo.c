// bench-c is testkit's echo tool in freestanding C (no libc, no WASI), so
// internal/plugin's benchmarks can time the host's tool-call path with a
// guest whose own work is small: Go's Wasm code generation makes even a
// zero-allocation Go guest spend most of a call in the guest.
//
// Its tool "echo_c" decodes its arguments, a JSON object whose one member
// "text" is a string (escapes, \u sequences and surrogate pairs decoded;
// any other member, value kind or malformed input is an error result
// naming the byte), logs through dsh:host/v1::log, and returns the text.
// The text is decoded straight into the output buffer, eight bytes at a
// time while there is nothing to unescape.
//
// Built at test time by internal/guestbuild with
// clang --target=wasm32 -O2 -ffreestanding -nostdlib -Wl,--no-entry.
#include <stdint.h>

#define DSH_IMPORT(name) __attribute__((import_module("dsh:host/v1"), import_name(name)))
#define DSH_EXPORT(name) __attribute__((export_name(name)))

DSH_IMPORT("log") uint64_t host_log(const char *in, uint32_t in_len, char *out, uint32_t out_cap);
DSH_IMPORT("tool_register") uint64_t tool_register(const char *in, uint32_t in_len, char *out, uint32_t out_cap);

#define MAX_INPUT (256 << 10)
static char input[MAX_INPUT];
static char output[MAX_INPUT + 1];
static char reply[256];

#define LIT(s) s, sizeof(s) - 1

DSH_EXPORT("dsh_abi_version") int32_t dsh_abi_version(void) { return 1; }

DSH_EXPORT("dsh_alloc") char *dsh_alloc(int32_t size) {
	return size >= 0 && size <= MAX_INPUT ? input : 0;
}

static uint64_t ok(uint32_t n) {
	output[0] = 0;
	return (uint64_t)(uintptr_t)output << 32 | (n + 1);
}

// fail returns an error result: msg, then " at byte " and the offset.
static uint64_t fail(const char *msg, uint32_t at) {
	uint32_t n = 1;
	output[0] = 1;
	while (*msg) output[n++] = *msg++;
	const char *s = " at byte ";
	while (*s) output[n++] = *s++;
	char digits[10];
	int d = 0;
	do { digits[d++] = (char)('0' + at % 10); at /= 10; } while (at);
	while (d) output[n++] = digits[--d];
	return (uint64_t)(uintptr_t)output << 32 | n;
}

DSH_EXPORT("dsh_init") uint64_t dsh_init(const char *config, uint32_t len) {
	(void)config; (void)len;
	uint64_t r = tool_register(LIT("{\"name\":\"echo_c\",\"description\":\"Echo the text argument.\","
		"\"parameters\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}}"),
		reply, sizeof reply);
	if (r >> 32) {
		uint32_t n = (uint32_t)r < sizeof reply ? (uint32_t)r : sizeof reply;
		output[0] = 1;
		for (uint32_t i = 0; i < n; i++) output[1 + i] = reply[i];
		return (uint64_t)(uintptr_t)output << 32 | (n + 1);
	}
	return 0;
}

static const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;

// special is non-zero when one of x's bytes is a quote, a backslash, a
// control character or outside ASCII.
static inline uint64_t special(uint64_t x) {
	uint64_t q = x ^ (ones * '"'), s = x ^ (ones * '\\');
	return ((x - ones * 0x20) | (q - ones) | (s - ones) | x) & highs;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

static int hex4(const char *p, const char *end, uint32_t *v) {
	if (end - p < 4) return 0;
	uint32_t r = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);
		if (h < 0) return 0;
		r = r << 4 | (uint32_t)h;
	}
	*v = r;
	return 1;
}

static char *put_utf8(char *o, uint32_t r) {
	if (r < 0x80) { *o++ = (char)r; }
	else if (r < 0x800) { *o++ = (char)(0xC0 | r >> 6); *o++ = (char)(0x80 | (r & 0x3F)); }
	else if (r < 0x10000) { *o++ = (char)(0xE0 | r >> 12); *o++ = (char)(0x80 | (r >> 6 & 0x3F)); *o++ = (char)(0x80 | (r & 0x3F)); }
	else { *o++ = (char)(0xF0 | r >> 18); *o++ = (char)(0x80 | (r >> 12 & 0x3F)); *o++ = (char)(0x80 | (r >> 6 & 0x3F)); *o++ = (char)(0x80 | (r & 0x3F)); }
	return o;
}

static const char *skip_ws(const char *p, const char *end) {
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
	return p;
}

// string decodes the JSON string at *pp (its opening quote) into o, or
// only validates it if o is 0. It returns the end of the decoded text (o
// itself when validating), or 0 with *pp at the offending byte. Bytes
// outside ASCII are copied as they are; the host replaces invalid UTF-8
// in results.
static char *string(const char **pp, const char *end, char *o) {
	const char *p = *pp + 1;
	char tmp[4];
	for (;;) {
		while (end - p >= 8) {
			uint64_t x;
			__builtin_memcpy(&x, p, 8);
			uint64_t m = special(x);
			if (m) {
				// The lowest flagged byte is a real one: copy the plain
				// bytes before it at once instead of one by one.
				unsigned n = (unsigned)__builtin_ctzll(m) / 8;
				if (o) { __builtin_memcpy(o, &x, 8); o += n; }
				p += n;
				break;
			}
			if (o) { __builtin_memcpy(o, &x, 8); o += 8; }
			p += 8;
		}
		if (p >= end) { *pp = p; return 0; }
		char c = *p;
		if (c == '"') { *pp = p + 1; return o ? o : (char *)p; }
		if ((unsigned char)c < 0x20) { *pp = p; return 0; }
		p++;
		if (c != '\\') { if (o) *o++ = c; continue; }
		if (p >= end) { *pp = p; return 0; }
		char e;
		switch (*p++) {
		case '"': e = '"'; break;
		case '\\': e = '\\'; break;
		case '/': e = '/'; break;
		case 'b': e = '\b'; break;
		case 'f': e = '\f'; break;
		case 'n': e = '\n'; break;
		case 'r': e = '\r'; break;
		case 't': e = '\t'; break;
		case 'u': {
			uint32_t r, r2;
			if (!hex4(p, end, &r)) { *pp = p; return 0; }
			p += 4;
			if (r >= 0xD800 && r < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
			    hex4(p + 2, end, &r2) && r2 >= 0xDC00 && r2 < 0xE000) {
				r = 0x10000 + ((r - 0xD800) << 10) + (r2 - 0xDC00);
				p += 6;
			} else if (r >= 0xD800 && r < 0xE000) {
				r = 0xFFFD;
			}
			if (o) o = put_utf8(o, r);
			else put_utf8(tmp, r);
			continue;
		}
		default:
			*pp = p - 1;
			return 0;
		}
		if (o) *o++ = e;
	}
}

// frame is the tool's name, NUL, the call context JSON, NUL, the
// arguments.
DSH_EXPORT("dsh_tool") uint64_t dsh_tool(const char *frame, uint32_t len) {
	const char *end = frame + len, *p = frame;
	for (int nul = 0; nul < 2; p++) {
		if (p >= end) return fail("malformed frame", len);
		if (*p == 0) nul++;
	}
	const char *args = p;
#define AT(q) (uint32_t)((q) - args)
	p = skip_ws(p, end);
	if (p >= end || *p != '{') return fail("arguments: want a JSON object", AT(p));
	p = skip_ws(p + 1, end);
	char *text_end = 0;
	if (p < end && *p == '}') p++;
	else for (;;) {
		if (p >= end || *p != '"') return fail("arguments: want a member name", AT(p));
		// Member names are compared as written: "text" spelt with
		// escapes counts as an unknown member.
		const char *key = p + 1;
		if (!string(&p, end, 0)) return fail("arguments: bad string", AT(p));
		int is_text = p - key == 5 && key[0] == 't' && key[1] == 'e' && key[2] == 'x' && key[3] == 't' && key[4] == '"';
		p = skip_ws(p, end);
		if (p >= end || *p != ':') return fail("arguments: want ':'", AT(p));
		p = skip_ws(p + 1, end);
		if (!is_text) return fail("arguments: unknown member", AT(key - 1));
		if (p >= end || *p != '"') return fail("arguments: text must be a string", AT(p));
		if (!(text_end = string(&p, end, output + 1))) return fail("arguments: bad string", AT(p));
		p = skip_ws(p, end);
		if (p < end && *p == ',') { p = skip_ws(p + 1, end); continue; }
		if (p < end && *p == '}') { p++; break; }
		return fail("arguments: want ',' or '}'", AT(p));
	}
	if (skip_ws(p, end) != end) return fail("arguments: data after the object", AT(p));
	if (!text_end) return fail("arguments: missing text", AT(p));
	host_log(LIT("{\"level\":\"debug\",\"message\":\"echo\"}"), reply, sizeof reply);
	return ok((uint32_t)(text_end - (output + 1)));
}
