#include "policy/policy_flags.h"

#include <string.h>

#include "policy/policy.h"
#include "runtime/error.h"
#include "runtime/flags.h"

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

int ro__flag_activation(void *spec, const char *s, char *err, size_t errlen)
{
    ro_policy_spec_t *p = spec;
    if (strcmp(s, "tanh") == 0)
        p->activation = RO_ACT_TANH;
    else if (strcmp(s, "relu") == 0)
        p->activation = RO_ACT_RELU;
    else
        return ro__errorf(err, errlen, RO_EINVAL, "--activation '%s': expected tanh or relu", s);
    return 0;
}

int ro__flag_gemm(void *spec, const char *s, char *err, size_t errlen)
{
    ro_policy_spec_t *p = spec;
    if (strcmp(s, "exact") == 0)
        p->gemm = RO_GEMM_EXACT;
    else if (strcmp(s, "openblas") == 0)
        p->gemm = RO_GEMM_BLAS;
    else
        return ro__errorf(err, errlen, RO_EINVAL, "--gemm '%s': expected exact or openblas", s);
    return 0;
}

int ro__policy_flags_check(const void *spec, bool hidden, bool activation, bool gemm, char *err,
                           size_t errlen)
{
    const ro_policy_spec_t *p = spec;
    const char *shape = hidden ? "hidden" : activation ? "activation" : NULL;
    if (p->kind == RO_POLICY_RANDOM && (shape || gemm))
        return ro__errorf(err, errlen, RO_EINVAL, "--%s: --policy random runs no MLP",
                          shape ? shape : "gemm");
    if (p->params_path && shape)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--%s: the policy file '%s' sets the MLP's layers and activation", shape,
                          p->params_path);
    return 0;
}
