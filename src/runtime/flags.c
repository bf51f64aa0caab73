#include "runtime/flags.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/text.h"

/* Where --help starts a flag's help text. */
#define HELP_COLUMN 26

int ro__flag_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out,
                 char *err, size_t errlen)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') /* strtoull would take a sign or blanks */
        goto bad;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi)
        goto bad;
    *out = v;
    return 0;
bad:
    return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': expected an integer in [%llu, %llu]", flag,
                      s, (unsigned long long)lo, (unsigned long long)hi);
}

int ro__flag_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi, uint32_t *out,
                 char *err, size_t errlen)
{
    uint64_t v;
    int rc = ro__flag_u64(flag, s, lo, hi, &v, err, errlen);
    if (rc == 0)
        *out = (uint32_t)v;
    return rc;
}

static int seconds_at_least(const char *flag, const char *s, double lo, double *out, char *err,
                            size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e9)
        return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': expected a number of seconds >= 0",
                          flag, s);
    if (v < lo)
        return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': expected at least %g", flag, s, lo);
    *out = v;
    return 0;
}

int ro__flag_seconds(const char *flag, const char *s, double *out, char *err, size_t errlen)
{
    return seconds_at_least(flag, s, 0.0, out, err, errlen);
}

int ro__flag_choice(const char *flag, const char *s, const char *const *choices, int *index,
                    char *err, size_t errlen)
{
    for (int i = 0; choices[i]; i++)
        if (strcmp(s, choices[i]) == 0) {
            *index = i;
            return 0;
        }
    char list[256];
    return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': expected %s", flag, s,
                      ro__text_join(list, sizeof list, choices, 1, " or "));
}

/* One flag's value into its field. */
static int parse_value(const ro_flag_t *f, void *cfg, const char *s, char *err, size_t errlen)
{
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", f->name);
    void *field = (char *)cfg + f->offset;
    switch (f->kind) {
    case RO_FLAG_BOOL:
        *(bool *)field = true;
        return 0;
    case RO_FLAG_U32:
        return ro__flag_u32(flag, s, (uint32_t)f->lo, (uint32_t)f->hi, field, err, errlen);
    case RO_FLAG_U64:
        return ro__flag_u64(flag, s, f->lo, f->hi, field, err, errlen);
    case RO_FLAG_SECONDS:
        return seconds_at_least(flag, s, (double)f->lo / 1000.0, field, err, errlen);
    case RO_FLAG_STRING:
        if (*s == '\0')
            return ro__errorf(err, errlen, RO_EINVAL, "%s '': expected %s", flag,
                              f->value ? f->value : "a value");
        *(const char **)field = s;
        return 0;
    case RO_FLAG_CHOICE:
        return ro__flag_choice(flag, s, f->choices, field, err, errlen);
    case RO_FLAG_FN:
        return f->parse(field, s, err, errlen);
    case RO_FLAG_SECTION:
        break;
    }
    return RO_EINVAL;
}

int ro__flags_parse(const ro_flag_t *flags, size_t n, void *cfg, bool *given, int argc, char **argv,
                    int *operands, char *err, size_t errlen)
{
    struct option *opts = calloc(n + 1, sizeof *opts);
    if (!opts)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory parsing the command line");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (given)
            given[i] = false;
        if (flags[i].kind == RO_FLAG_SECTION)
            continue;
        opts[k].name = flags[i].name;
        opts[k].has_arg = flags[i].value ? required_argument : no_argument;
        opts[k].val = 256 + (int)i;
        k++;
    }
    optind = 1;
    opterr = 0; /* our own one-line messages */
    int rc = 0, opt;
    while (rc == 0 && (opt = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        /* getopt_long leaves optind just past the offending argument. */
        if (opt == ':')
            rc = ro__errorf(err, errlen, RO_EINVAL, "%s: missing value (see --help)",
                            argv[optind - 1]);
        else if (opt < 256 || (size_t)(opt - 256) >= n)
            rc = ro__errorf(err, errlen, RO_EINVAL, "unknown option '%s' (see --help)",
                            argv[optind - 1]);
        else {
            size_t i = (size_t)(opt - 256);
            rc = parse_value(&flags[i], cfg, optarg, err, errlen);
            if (given)
                given[i] = true;
        }
    }
    free(opts);
    if (rc)
        return rc;
    if (operands)
        *operands = optind;
    else if (optind < argc)
        return ro__errorf(err, errlen, RO_EINVAL, "unexpected argument '%s' (see --help)",
                          argv[optind]);
    return 0;
}

bool ro__flags_given(const ro_flag_t *flags, size_t n, const bool *given, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (flags[i].kind != RO_FLAG_SECTION && strcmp(flags[i].name, name) == 0)
            return given[i];
    return false;
}

bool ro__flags_answer(bool help, bool version, void (*usage)(FILE *f), const char *program,
                      const char *version_text)
{
    if (help)
        usage(stdout);
    else if (version)
        printf("%s %s\n", program, version_text);
    return help || version;
}

void ro__flags_usage(FILE *f, const char *head, const ro_flag_t *flags, size_t n)
{
    fputs(head, f);
    for (size_t i = 0; i < n; i++) {
        const ro_flag_t *fl = &flags[i];
        if (fl->kind == RO_FLAG_SECTION) {
            fprintf(f, "%s:\n", fl->name);
            continue;
        }
        int w =
            fprintf(f, "  --%s%s%s", fl->name, fl->value ? " " : "", fl->value ? fl->value : "");
        fprintf(f, "%*s", w < HELP_COLUMN ? HELP_COLUMN - w : 2, "");
        for (const char *h = fl->help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n')
                fprintf(f, "%*s", HELP_COLUMN, "");
        }
        fputc('\n', f);
    }
}
