#include "runtime/text.h"

#include <math.h>
#include <string.h>

const char *ro__text_log(char *out, size_t outlen, const char *s, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    if (!s)
        s = "";
    size_t o = 0, i = 0;
    /* Room for the longest escape (4) and "..." (3) and the NUL. */
    for (; s[i] && i < max && o + 4 + 3 + 1 <= outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') {
            out[o++] = '\\';
            out[o++] = '\\';
        } else if (c >= 0x20 && c < 0x7f) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (s[i] && o + 3 + 1 <= outlen) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

void ro__json_string(FILE *f, const char *s, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    if (!s)
        s = "";
    fputc('"', f);
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c >= 0x20 && c < 0x7f) {
            fputc(c, f);
        } else {
            /* Control characters must be escaped; bytes over 0x7e may be
             * half a UTF-8 sequence, which a strict parser refuses. */
            fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
        }
    }
    if (s[i])
        fputs("...", f);
    fputc('"', f);
}

void ro__json_double(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fputs("null", f);
}

char *ro__text_u64(char *p, uint64_t v)
{
    char tmp[RO_TEXT_U64_MAX];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

const char *ro__text_join(char *out, size_t outlen, const char *const *items, size_t step,
                          const char *last)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; items[i] && used < outlen; i += step)
        used += (size_t)snprintf(out + used, outlen - used, "%s%s",
                                 i == 0            ? ""
                                 : items[i + step] ? ", "
                                                   : last,
                                 items[i]);
    return out;
}
