#include "policy/policy_flags.h"

#include <string.h>

#include "policy/policy.h"
#include "runtime/error.h"
#include "runtime/flags.h"

void ro__policy_flags_defaults(void *spec)
{
    ro_policy_spec_t *p = spec;
    memset(p, 0, sizeof *p);
    p->kind = RO_POLICY_MLP;
    p->hidden[0] = p->hidden[1] = 64;
    p->nhidden = 2;
    p->activation = RO_ACT_TANH;
}

int ro__flag_hidden(void *spec, const char *s, char *err, size_t errlen)
{
    ro_policy_spec_t *p = spec;
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
    return ro__errorf(err, errlen, RO_EINVAL,
                      "--hidden '%s': expected 1 to %d comma-separated widths in [1, 65536], e.g. "
                      "64,64",
                      s, RO_POLICY_MAX_HIDDEN);
}

int ro__flag_policy(void *spec, const char *s, char *err, size_t errlen)
{
    ro_policy_spec_t *p = spec;
    if (*s == '\0')
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--policy '': expected random, mlp or a PolicyParams file");
    p->kind = strcmp(s, "random") == 0 ? RO_POLICY_RANDOM : RO_POLICY_MLP;
    p->params_path = strcmp(s, "random") == 0 || strcmp(s, "mlp") == 0 ? NULL : s;
    return 0;
}

int ro__flag_recurrent(void *spec, const char *s, char *err, size_t errlen)
{
    ro_policy_spec_t *p = spec;
    const char *colon = strchr(s, ':');
    uint32_t h;
    const size_t kl = colon ? (size_t)(colon - s) : 0;
    const ro_cell_t cell = kl == 3 && strncmp(s, "gru", 3) == 0    ? RO_CELL_GRU
                           : kl == 4 && strncmp(s, "lstm", 4) == 0 ? RO_CELL_LSTM
                                                                   : RO_CELL_NONE;
    if (!cell || ro__flag_u32("--recurrent", colon + 1, 1, RO_CELL_MAX, &h, err, errlen))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--recurrent '%s': expected gru:H or lstm:H with H in [1, %u], e.g. "
                          "gru:128",
                          s, RO_CELL_MAX);
    p->cell = cell;
    p->cell_hidden = h;
    return 0;
}

/* The spec's fields that a flag sets to one of a few values by name. */
typedef enum { NAMED_ACTIVATION, NAMED_GEMM } named_field_t;

static const struct named {
    const char *flag;
    const char *const *names; /* NULL-terminated; names[i] stands for first + i */
    int first;
} NAMED[] = {
    [NAMED_ACTIVATION] = {"--activation", (const char *const[]){"tanh", "relu", NULL}, RO_ACT_TANH},
    [NAMED_GEMM] = {"--gemm", (const char *const[]){"exact", "openblas", NULL}, RO_GEMM_EXACT},
};

/* set_named sets spec's field f to the value s names; else RO_EINVAL with
 * the flag's names. */
static int set_named(ro_policy_spec_t *p, named_field_t f, const char *s, char *err, size_t errlen)
{
    int i;
    int rc = ro__flag_choice(NAMED[f].flag, s, NAMED[f].names, &i, err, errlen);
    if (rc)
        return rc;
    if (f == NAMED_ACTIVATION)
        p->activation = (ro_activation_t)(NAMED[f].first + i);
    else
        p->gemm = (ro_gemm_t)(NAMED[f].first + i);
    return 0;
}

int ro__flag_activation(void *spec, const char *s, char *err, size_t errlen)
{
    return set_named(spec, NAMED_ACTIVATION, s, err, errlen);
}

int ro__flag_gemm(void *spec, const char *s, char *err, size_t errlen)
{
    return set_named(spec, NAMED_GEMM, s, err, errlen);
}

int ro__flag_kernels(void *spec, const char *s, char *err, size_t errlen)
{
    ro_policy_spec_t *p = spec;
    static const ro_kernel_path_t paths[] = {RO_KERNELS_AUTO, RO_KERNELS_AVX512, RO_KERNELS_AVX2,
                                             RO_KERNELS_SCALAR};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(s, ro__kernels_path_name(paths[i])) == 0) {
            p->kernels = paths[i];
            return 0;
        }
    return ro__errorf(err, errlen, RO_EINVAL,
                      "--kernels '%s': expected auto, avx512, avx2 or scalar", s);
}

int ro__policy_flags_check(const void *spec, bool hidden, bool activation, bool gemm, char *err,
                           size_t errlen)
{
    const ro_policy_spec_t *p = spec;
    const char *shape = hidden       ? "hidden"
                        : activation ? "activation"
                        : p->cell    ? "recurrent"
                                     : NULL;
    if (p->kind == RO_POLICY_RANDOM && (shape || gemm))
        return ro__errorf(err, errlen, RO_EINVAL, "--%s: --policy random runs no MLP",
                          shape ? shape : "gemm");
    if (p->params_path && shape)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--%s: the policy file '%s' sets the MLP's layers and activation", shape,
                          p->params_path);
    return 0;
}
