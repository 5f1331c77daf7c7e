/* tests/core/test_text.c — text_escaped: control characters, a backslash, invalid
 * UTF-8 and invisible code points shown escaped, other UTF-8 kept, and the cut at
 * max characters or at the buffer's room, ending in "..." and never mid-sequence. */
#include <string.h>

#include "core/text.h"
#include "testutil.h"

static void want(const char *in, size_t n, size_t max, const char *expect) {
    char out[256];
    text_escaped(out, n, in, max);
    T_CHECK(!strcmp(out, expect), "'%s' -> '%s', want '%s'", in, out, expect);
}

int main(void) {
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
