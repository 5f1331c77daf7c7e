/* tests/core/test_text.c — text_escaped: control characters, a backslash, invalid
 * UTF-8 and invisible code points shown escaped, other UTF-8 kept, and the cut at
 * max characters or at the buffer's room, ending in "..." and never mid-sequence. */
#include <string.h>

#include "core/check.h"
#include "core/text.h"
#include "testutil.h"

static void want(const char *in, size_t n, size_t max, const char *expect) {
    char out[256];
    text_escaped(out, n, in, max);
    T_CHECK(!strcmp(out, expect), "'%s' -> '%s', want '%s'", in, out, expect);
}

static void want_line(const char *in, size_t n, int cut, const char *expect) {
    char out[256];
    text_one_line(out, n, in, cut);
    T_CHECK(!strcmp(out, expect), "one line '%s' -> '%s', want '%s'", in, out, expect);
}

/* err_set and err_prefix keep every message one line, whatever a value held,
 * and a message past GrpoErr's room ends in "..." at a character boundary. */
static void err_messages(void) {
    GrpoErr err;
    err_set(&err, "reply: %s", "line one\nline two\x1b[2J\xef\xbb\xbf");
    T_CHECK(!strcmp(err.msg, "reply: line one\\nline two\\x1b[2J\\ufeff"), "err_set: '%s'", err.msg);
    err_prefix(&err, "%s", "a\rb");
    T_CHECK(!strcmp(err.msg, "a\\rb: reply: line one\\nline two\\x1b[2J\\ufeff"), "err_prefix: '%s'", err.msg);
    char long_text[3000];
    for (int i = 0; i < 1499; i++) memcpy(long_text + 2 * i, "\xc3\xa9", 2); /* 1499 x U+00E9 */
    long_text[2998] = 0;
    err_set(&err, "%s", long_text);
    size_t len = strlen(err.msg);
    T_CHECK(len < sizeof err.msg && len > 1000, "a long message fills the room: %zu bytes", len);
    T_CHECK(len >= 3 && !strcmp(err.msg + len - 3, "..."), "a long message ends in '...'");
    T_CHECK(len >= 5 && !memcmp(err.msg + len - 5, "\xc3\xa9", 2), "cut between characters");
    char huge[6000];
    memset(huge, 'x', sizeof huge - 1);
    huge[sizeof huge - 1] = 0;
    err_set(&err, "%s\n", huge); /* longer than err_set's own room: cut there too */
    len = strlen(err.msg);
    T_CHECK(len < sizeof err.msg && !strcmp(err.msg + len - 3, "..."), "a huge message ends in '...'");
    T_CHECK(!strchr(err.msg, '\n'), "a huge message is one line");
}

int main(void) {
    want_line("a\nb\\n\x1b", 256, 0, "a\\nb\\n\\x1b");                  /* the backslash kept */
    want_line("\xef\xbb\xbf{", 256, 0, "\\ufeff{");
    want_line("abc", 256, 1, "abc...");                                      /* cut before */
    want_line("abcdefgh", 8, 1, "abcd...");
    want_line("\xc3\xa9\xc3\xa9\xc3\xa9x", 8, 1, "\xc3\xa9\xc3\xa9...");
    err_messages();
    want("plain text", 256, 0, "plain text");
    want("a\nb\rc\td", 256, 0, "a\\nb\\rc\\td");
    want("\x1b[31mred\x1b[0m", 256, 0, "\\x1b[31mred\\x1b[0m");
    want("back\\slash", 256, 0, "back\\\\slash");
    want("\xef\xbb\xbfkey", 256, 0, "\\ufeffkey");                      /* a BOM */
    want("zero\xe2\x80\x8bwidth", 256, 0, "zero\\u200bwidth");            /* U+200B */
    want("bidi\xe2\x80\xaex", 256, 0, "bidi\\u202ex");                    /* U+202E */
    want("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", 256, 0, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
    want("bad\xff\xc3(", 256, 0, "bad\\xff\\xc3(");                     /* invalid bytes */
    want("\xed\xa0\x80", 256, 0, "\\xed\\xa0\\x80");                     /* a surrogate */
    want("0123456789", 256, 4, "0123...");
    want("0123", 256, 4, "0123");
    want("\xc3\xa9\xc3\xa9\xc3\xa9", 256, 2, "\xc3\xa9\xc3\xa9...");   /* cut between sequences */
    want("abcdefghij", 8, 0, "abcd...");                                  /* the buffer's room */
    want("\n\n\n\n", 9, 0, "\\n\\n...");
    want(NULL, 256, 0, "");
    return t_summary("test_text");
}
