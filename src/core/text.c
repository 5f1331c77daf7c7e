/* core/text.c — see text.h. */
#include "core/text.h"

#include <stdio.h>
#include <string.h>

/* Code points that print as nothing: the BOM, zero-width spaces and joiners, the
 * bidirectional controls, the word joiner and invisible operators. */
static int invisible(unsigned cp) {
    return cp == 0xfeff || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x00ad;
}

/* The length of the UTF-8 sequence at s (its code point in *cp), or 0 when invalid. */
static int utf8_at(const unsigned char *s, unsigned *cp) {
    int len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (!len) return 0;
    unsigned c = s[0] & (0x7f >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) || (len == 4 && (c < 0x10000 || c > 0x10ffff)))
        return 0;
    *cp = c;
    return len;
}

/* text_escaped and text_one_line: keep_backslash leaves '\\' as it is. */
static char *escaped(char *out, size_t n, const char *s, size_t max, int keep_backslash, int cut_before) {
    if (!n) return out;
    size_t k = 0, shown = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        char piece[16];
        unsigned cp;
        int len = 1;
        if (*p == '\\') snprintf(piece, sizeof piece, keep_backslash ? "\\" : "\\\\");
        else if (*p == '\n') snprintf(piece, sizeof piece, "\\n");
        else if (*p == '\r') snprintf(piece, sizeof piece, "\\r");
        else if (*p == '\t') snprintf(piece, sizeof piece, "\\t");
        else if (*p < 0x20 || *p == 0x7f) snprintf(piece, sizeof piece, "\\x%02x", *p);
        else if (*p < 0x80) snprintf(piece, sizeof piece, "%c", *p);
        else if ((len = utf8_at(p, &cp)) == 0) len = 1, snprintf(piece, sizeof piece, "\\x%02x", *p);
        else if (invisible(cp)) snprintf(piece, sizeof piece, "\\u%04x", cp);
        else memcpy(piece, p, (size_t)len), piece[len] = 0;
        size_t plen = strlen(piece);
        if ((max && shown == max) || k + plen + 4 > n) { /* no room for it and the "..." */
            if (k + 4 <= n) memcpy(out + k, "...", 3), k += 3;
            break;
        }
        memcpy(out + k, piece, plen);
        k += plen;
        shown++;
        p += len;
    }
    if (cut_before && !*p && n >= 4 && (k + 4 <= n || (k = n - 4, 1))) {
        while (k > 0 && ((unsigned char)out[k] & 0xc0) == 0x80) k--; /* never mid-sequence */
        memcpy(out + k, "...", 3), k += 3;
    }
    out[k] = 0;
    return out;
}

char *text_escaped(char *out, size_t n, const char *s, size_t max) {
    return escaped(out, n, s, max, 0, 0);
}

char *text_one_line(char *out, size_t n, const char *s, int cut_before) {
    return escaped(out, n, s, 0, 1, cut_before);
}
