/*
 * hello is the C kit's example plugin: a section that uses a variable, the
 * variable, and a tool that reverses text. Build it with ./build.sh.
 */
#include "dsh.h"

DSH_EXPORT("dsh_init") uint64_t dsh_init(const char *config, uint32_t len) {
	(void)config;
	(void)len;
	dsh_reply r = dsh_register_variable("c_greeting");
	if (r.status) return dsh_fail("variable c_greeting", &r);
	dsh_reply_free(&r);
	r = dsh_register_section("c:hello", 150, "The C kit says {{c_greeting}}. Reverse text with c_reverse.", 0);
	if (r.status) return dsh_fail("section c:hello", &r);
	dsh_reply_free(&r);
	r = dsh_register_tool("c_reverse", "Reverse a text, character by character.",
		"{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}");
	if (r.status) return dsh_fail("tool c_reverse", &r);
	dsh_reply_free(&r);
	return 0;
}

/* Input: name NUL context. One variable here, so the name is known. */
DSH_EXPORT("dsh_variable") uint64_t dsh_variable(const char *in, uint32_t len) {
	(void)in;
	(void)len;
	return dsh_ok("hello from C");
}

/* Input: name NUL context NUL arguments. */
DSH_EXPORT("dsh_tool") uint64_t dsh_tool(const char *in, uint32_t len) {
	dsh_str f[3];
	dsh_split(in, len, f, 3);
	if (!dsh_str_eq(f[0], "c_reverse")) return dsh_error("unknown tool");
	dsh_buf text = {0};
	int rc = dsh_arg_string(f[2], "text", &text);
	if (rc) {
		dsh_buf_free(&text);
		return dsh_error(rc == DSH_ARG_MISSING ? "argument \"text\": missing" : "argument \"text\": want a string");
	}
	/* Reverse by UTF-8 character: copy each sequence, last first. */
	char *rev = malloc(text.n + 1);
	uint32_t o = 0;
	for (uint32_t end = text.n; end > 0;) {
		uint32_t start = end - 1;
		while (start > 0 && ((unsigned char)text.p[start] & 0xc0) == 0x80) start--;
		memcpy(rev + o, text.p + start, end - start);
		o += end - start;
		end = start;
	}
	uint64_t out = dsh_okn(rev, o);
	free(rev);
	dsh_buf_free(&text);
	dsh_log("debug", "c_reverse done");
	return out;
}
