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

/* A message made one line, the net under every GrpoErr and every line cli/
 * prints: s as out[n] shows it, control characters, invalid UTF-8 and invisible
 * code points escaped as text_escaped does, a backslash kept as it is (the
 * message's own quoted values are already escaped). Cut to out's room at a
 * character boundary, ending in "..."; also ending in "..." when cut_before says
 * s itself was already cut. Returns out. */
char *text_one_line(char *out, size_t n, const char *s, int cut_before);

#endif
