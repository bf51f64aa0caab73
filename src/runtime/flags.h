/*
 * Strict parsing of command-line values shared by rollout-node and
 * rollout-learner. Each returns 0, or RO_EINVAL with one line in err naming
 * the flag, the value and what is accepted.
 */
#ifndef RO_FLAGS_H
#define RO_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* A decimal integer in [lo, hi]: the whole string, no sign. */
int ro__flag_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out,
                 char *err, size_t errlen);
int ro__flag_u32(const char *flag, const char *s, uint32_t lo, uint32_t hi, uint32_t *out,
                 char *err, size_t errlen);

/* A finite number of seconds >= 0. */
int ro__flag_seconds(const char *flag, const char *s, double *out, char *err, size_t errlen);

/* --hidden: 1 to RO_POLICY_MAX_HIDDEN comma-separated widths. */
int ro__flag_hidden(const char *s, ro_policy_spec_t *p, char *err, size_t errlen);

/* --policy random|mlp|FILE, --activation tanh|relu, --gemm exact|openblas. */
int ro__flag_policy(const char *s, ro_policy_spec_t *p, char *err, size_t errlen);
int ro__flag_activation(const char *s, ro_policy_spec_t *p, char *err, size_t errlen);
int ro__flag_gemm(const char *s, ro_policy_spec_t *p, char *err, size_t errlen);

/* --token-file: one line (trailing whitespace trimmed) into out. */
int ro__flag_token_file(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* ro__flag_token_file_exposed: true, with a one-line warning in msg, if the
 * token file can be read or written by users other than its owner. */
bool ro__flag_token_file_exposed(const char *path, char *msg, size_t msglen);

/* ro__flag_getopt_error words what getopt_long reported (opt ':' for a
 * missing value, anything else an unknown option) as one line; RO_EINVAL. */
int ro__flag_getopt_error(int opt, char **argv, char *err, size_t errlen);

#endif
