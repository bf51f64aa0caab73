#include "metrics/prom_text.h"

#include <math.h>
#include <string.h>

void ro__prom_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(FILE *f, double v)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (isinf(v))
        fputs(v > 0 ? "+Inf" : "-Inf", f);
    else
        fprintf(f, "%.17g", v);
}

void ro__prom_sample(FILE *f, const char *name, const char *labels, double v)
{
    if (labels[0])
        fprintf(f, "%s{%s} ", name, labels);
    else
        fprintf(f, "%s ", name);
    value(f, v);
    fputc('\n', f);
}

void ro__prom_histo(FILE *f, const char *name, const char *labels, const ro_histo_t *h)
{
    uint64_t cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (uint32_t i = 0; i <= h->nedges; i++) {
        cum += h->count[i];
        fprintf(f, "%s_bucket{%s%sle=\"", name, labels, sep);
        if (i < h->nedges)
            value(f, h->edges[i]);
        else
            fputs("+Inf", f);
        fprintf(f, "\"} %llu\n", (unsigned long long)cum);
    }
    char n[160];
    snprintf(n, sizeof n, "%s_sum", name);
    ro__prom_sample(f, n, labels, h->sum);
    snprintf(n, sizeof n, "%s_count", name);
    ro__prom_sample(f, n, labels, (double)h->n);
}

void ro__prom_label(char *labels, size_t len, const char *key, const char *val)
{
    size_t k = strlen(labels);
    int w = snprintf(labels + k, len > k ? len - k : 0, "%s%s=\"", k ? "," : "", key);
    if (w < 0 || k + (size_t)w + 2 > len) { /* no room for the pair: leave labels as they were */
        labels[k] = '\0';
        return;
    }
    size_t p = k + (size_t)w;
    for (const unsigned char *s = (const unsigned char *)(val ? val : ""); *s; s++) {
        char esc[3] = {(char)*s, 0, 0};
        if (*s == '\\' || *s == '"')
            esc[0] = '\\', esc[1] = (char)*s;
        else if (*s == '\n')
            esc[0] = '\\', esc[1] = 'n';
        else if (*s < 0x20 || *s == 0x7f)
            esc[0] = '?';
        size_t el = strlen(esc);
        if (p + el + 2 > len) /* room for the quote and the NUL */
            break;
        memcpy(labels + p, esc, el);
        p += el;
    }
    labels[p++] = '"';
    labels[p] = '\0';
}
