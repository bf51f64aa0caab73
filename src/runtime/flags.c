#include "runtime/flags.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/error.h"

/* Strict unsigned parse: the whole string, decimal, within [lo, hi]. */
int ro__flag_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out,
                 char *err, size_t errlen)
{
    char *end;
    errno = 0;
    if (*s == '-' || *s == '+' || *s == '\0')
        goto bad;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi)
        goto bad;
    *out = v;
    return 0;
bad:
    snprintf(err, errlen, "%s '%s': expected an integer in [%llu, %llu]", flag, s,
             (unsigned long long)lo, (unsigned long long)hi);
    return RO_EINVAL;
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

int ro__flag_seconds(const char *flag, const char *s, double *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e9) {
        snprintf(err, errlen, "%s '%s': expected a number of seconds >= 0", flag, s);
        return RO_EINVAL;
    }
    *out = v;
    return 0;
}

int ro__flag_hidden(const char *s, ro_policy_spec_t *p, char *err, size_t errlen)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        goto bad;
    strcpy(buf, s);
    p->nhidden = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (p->nhidden == RO_POLICY_MAX_HIDDEN)
            goto bad;
        uint32_t w;
        if (ro__flag_u32("--hidden", tok, 1, 65536, &w, err, errlen))
            goto bad;
        p->hidden[p->nhidden++] = w;
    }
    if (p->nhidden == 0 || s[strlen(s) - 1] == ',' || s[0] == ',' || strstr(s, ",,"))
        goto bad;
    return 0;
bad:
    snprintf(err, errlen,
             "--hidden '%s': expected 1 to %d comma-separated widths in [1, 65536], e.g. 64,64", s,
             RO_POLICY_MAX_HIDDEN);
    return RO_EINVAL;
}

int ro__flag_policy(const char *s, ro_policy_spec_t *p, char *err, size_t errlen)
{
    if (strcmp(s, "random") == 0) {
        p->kind = RO_POLICY_RANDOM;
        p->params_path = NULL;
    } else if (strcmp(s, "mlp") == 0) {
        p->kind = RO_POLICY_MLP;
        p->params_path = NULL;
    } else if (*s == '\0') {
        snprintf(err, errlen, "--policy '': expected random, mlp or a PolicyParams file");
        return RO_EINVAL;
    } else {
        p->kind = RO_POLICY_MLP;
        p->params_path = s;
    }
    return 0;
}

int ro__flag_activation(const char *s, ro_policy_spec_t *p, char *err, size_t errlen)
{
    if (strcmp(s, "tanh") == 0)
        p->activation = RO_ACT_TANH;
    else if (strcmp(s, "relu") == 0)
        p->activation = RO_ACT_RELU;
    else {
        snprintf(err, errlen, "--activation '%s': expected tanh or relu", s);
        return RO_EINVAL;
    }
    return 0;
}

int ro__flag_gemm(const char *s, ro_policy_spec_t *p, char *err, size_t errlen)
{
    if (strcmp(s, "exact") == 0)
        p->gemm = RO_GEMM_EXACT;
    else if (strcmp(s, "openblas") == 0)
        p->gemm = RO_GEMM_BLAS;
    else {
        snprintf(err, errlen, "--gemm '%s': expected exact or openblas", s);
        return RO_EINVAL;
    }
    return 0;
}

int ro__flag_token_file(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "--token-file '%s': cannot read it (%s)", path, strerror(errno));
        return RO_EINVAL;
    }
    size_t len = fread(out, 1, outlen - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    out[len] = '\0';
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r' || out[len - 1] == ' ' ||
                       out[len - 1] == '\t'))
        out[--len] = '\0';
    if (more || len == 0 || strlen(out) != len) {
        snprintf(err, errlen, "--token-file '%s': expected one line of 1 to %zu characters", path,
                 outlen - 2);
        return RO_EINVAL;
    }
    return 0;
}

bool ro__flag_token_file_exposed(const char *path, char *msg, size_t msglen)
{
    struct stat st;
    if (stat(path, &st) != 0 || !(st.st_mode & (S_IRWXG | S_IRWXO)))
        return false;
    snprintf(msg, msglen,
             "--token-file '%s' is accessible to other users (mode %03o): anyone who can read "
             "it can attach learners; chmod 600 it",
             path, (unsigned)(st.st_mode & 0777));
    return true;
}

int ro__flag_getopt_error(int opt, char **argv, char *err, size_t errlen)
{
    /* getopt_long leaves optind just past the offending argument. */
    if (opt == ':')
        return ro__errorf(err, errlen, RO_EINVAL, "%s: missing value (see --help)",
                          argv[optind - 1]);
    return ro__errorf(err, errlen, RO_EINVAL, "unknown option '%s' (see --help)", argv[optind - 1]);
}
