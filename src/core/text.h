/* core/text.h — untrusted text made safe for a one-line message: what a file, a
 * reply or another process wrote, quoted into ours. */
#ifndef GRPO_CORE_TEXT_H
#define GRPO_CORE_TEXT_H

#include <stddef.h>

/* s as out[n] (NUL-terminated) shows it, on one line: control characters as \n,
 * \r, \t or \xHH (ESC: \x1b), a backslash as \\, an invalid UTF-8 byte as \xHH,
 * invisible code points (BOM, zero-width spaces and joiners, bidi controls) as
 * \uXXXX; other UTF-8 kept. Past max shown characters (0: out's room) it is cut,
 * ending in "...". Returns out. */
char *text_escaped(char *out, size_t n, const char *s, size_t max);

#endif
