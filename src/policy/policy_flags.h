/*
 * The policy's command-line flags, shared by rollout-node and
 * rollout-learner as custom parsers of the one flag parser (runtime/flags.h):
 * each takes a ro_policy_spec_t as its field.
 */
#ifndef RO_POLICY_FLAGS_H
#define RO_POLICY_FLAGS_H

#include <stdbool.h>
#include <stddef.h>

/* --policy random|mlp|FILE */
int ro__flag_policy(void *spec, const char *value, char *err, size_t errlen);
/* --hidden: 1 to RO_POLICY_MAX_HIDDEN comma-separated widths. */
int ro__flag_hidden(void *spec, const char *value, char *err, size_t errlen);
/* --recurrent gru:H|lstm:H (H in 1..RO_CELL_MAX) */
int ro__flag_recurrent(void *spec, const char *value, char *err, size_t errlen);
/* --activation tanh|relu */
int ro__flag_activation(void *spec, const char *value, char *err, size_t errlen);
/* --gemm exact|openblas */
int ro__flag_gemm(void *spec, const char *value, char *err, size_t errlen);
/* --kernels auto|avx512|avx2|scalar: the exact kernels' instruction set;
 * whether this CPU runs it is checked when the policy is built. */
int ro__flag_kernels(void *spec, const char *value, char *err, size_t errlen);

/* ro__policy_flags_defaults sets spec (a ro_policy_spec_t) to the policy
 * the flags' help calls the default: a seeded MLP (--policy mlp) of
 * hidden widths 64,64 (--hidden) and tanh (--activation); all else zero. */
void ro__policy_flags_defaults(void *spec);

/* RO_POLICY_MODEL_FLAGS(OFFSET) is the flag table entries (runtime/flags.h)
 * of the MLP's shape, --hidden, --recurrent and --activation, for a
 * program's table whose ro_policy_spec_t lies at OFFSET: the node and
 * rollout-learner name and document them alike. */
/* clang-format off */
#define RO_POLICY_MODEL_FLAGS(OFFSET)                                                              \
    {RO_FLAG_FN, "hidden", "H1,H2,...", (OFFSET), .parse = ro__flag_hidden,                        \
     .help = "MLP hidden widths (default 64,64)"},                                                 \
    {RO_FLAG_FN, "recurrent", "gru:H|lstm:H", (OFFSET), .parse = ro__flag_recurrent,               \
     .help = "a GRU or LSTM cell of H units (up to 512) after the\nhidden layers; its state "       \
             "is kept per env row,\nzeroed at each episode start (default none)"},                 \
    {RO_FLAG_FN, "activation", "tanh|relu", (OFFSET), .parse = ro__flag_activation,                \
     .help = "MLP activation (default tanh)"}
/* clang-format on */

/* ro__policy_flags_check refuses the flags given (hidden, activation, gemm:
 * whether each appeared) that spec makes meaningless: any of them or
 * --recurrent with --policy random (no MLP), --hidden, --activation or
 * --recurrent with a policy file (the file sets them). Returns 0 or RO_EINVAL with one line naming
 * the flag. Called once the whole command line is parsed. */
int ro__policy_flags_check(const void *spec, bool hidden, bool activation, bool gemm, char *err,
                           size_t errlen);

#endif
