/*
 * Untrusted strings made safe to print: a peer's hello name, goodbye
 * reason or error message, a plugin's env name, a file's env spec. In a log
 * line, a control character could forge lines or drive the terminal (ESC
 * sequences); in a JSON line, a quote or a control character would break
 * the line for every strict parser. Numbers too: NaN and infinities are not
 * JSON. And integers in decimal without stdio (a signal handler, a hot
 * log line). Pure functions: any thread.
 */
#ifndef RO_TEXT_H
#define RO_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The most bytes of an untrusted string that a log line or a JSON field
 * shows; longer ones are cut and end in "...". */
#define RO_TEXT_SHOW_MAX 200

/*
 * ro__text_log writes s into out (outlen >= 8 bytes, NUL-terminated) for a
 * log line: printable ASCII as it is, a backslash as "\\", every other byte
 * (control characters, DEL, bytes of UTF-8 sequences) as "\xNN". At most
 * max bytes of s are shown; a longer s is cut, as is anything that does not
 * fit out, and then ends in "...". s NULL reads as "". Returns out.
 */
const char *ro__text_log(char *out, size_t outlen, const char *s, size_t max);

/*
 * ro__json_string writes s as a JSON string (with its quotes) to f: '"'
 * and '\\' escaped, control characters and every byte over 0x7e as
 * \u00NN, so the line is ASCII and parses strictly whatever s holds. At
 * most max bytes of s; a longer one ends in "...". s NULL writes "".
 */
void ro__json_string(FILE *f, const char *s, size_t max);

/* ro__text_join writes the names items[0], items[step], items[2 * step],
 * ... (up to a NULL) into out (NUL-terminated, cut to outlen), ", " between
 * them and last before the last one ("a, b or c" with last " or "), for a
 * message that lists what is accepted. Returns out. */
const char *ro__text_join(char *out, size_t outlen, const char *const *items, size_t step,
                          const char *last);

/* ro__json_double writes v to f as "%.17g" (it reads back exactly), or
 * null if v is NaN or infinite, which are not JSON numbers. */
void ro__json_double(FILE *f, double v);

/* The most bytes ro__text_u64 writes: the digits of UINT64_MAX. */
#define RO_TEXT_U64_MAX 20

/* ro__text_u64 writes the decimal digits of v at p (room for
 * RO_TEXT_U64_MAX bytes; no NUL) and returns the end. No stdio, locale or
 * allocation: a signal handler may call it (crash_report.c), and the
 * logger's episode lines use it where fprintf cost too much. */
char *ro__text_u64(char *p, uint64_t v);

#endif
