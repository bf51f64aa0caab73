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

/* ro__policy_flags_check refuses the flags given (hidden, activation, gemm:
 * whether each appeared) that spec makes meaningless: any of them or
 * --recurrent with --policy random (no MLP), --hidden, --activation or
 * --recurrent with a policy file (the file sets them). Returns 0 or RO_EINVAL with one line naming
 * the flag. Called once the whole command line is parsed. */
int ro__policy_flags_check(const void *spec, bool hidden, bool activation, bool gemm, char *err,
                           size_t errlen);

#endif
