/*
 * The spaces a Python env worker reports (the spec it writes at hello,
 * python/rollout_client/pyenv_spaces.py) read and checked as env ABI 2
 * spaces, and the layout of one env's row in the worker's shared memory.
 * The spec comes from an untrusted process: every count, shape and length
 * is checked against the bytes there are before anything is read.
 */
#ifndef RO_ENVS_PYENV_SPEC_H
#define RO_ENVS_PYENV_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "rollout/env.h"

typedef struct ro_pyspec {
    ro_env_spaces_t sp; /* names, bounds and nvec point into the arrays below */
    char names[RO_ENV_MAX_TENSORS][RO_ENV_MAX_NAME];
    float *bounds;  /* every low/high array, owned */
    uint32_t *nvec; /* every MultiDiscrete's counts, owned */
    uint8_t *raw;   /* the spec's bytes as read (restarts must match), owned */
    uint32_t raw_len;
    /* One env's row in the worker's memory (pyenv_proto.h). */
    uint32_t ndisc, nbox; /* int32 discrete entries, box floats */
    uint32_t off_act_i, off_act_f, off_reward, off_flags, off_seed;
    uint32_t off_obs[RO_ENV_MAX_TENSORS], off_reset[RO_ENV_MAX_TENSORS];
    uint32_t row_bytes[RO_ENV_MAX_TENSORS];
    uint32_t stride;
} ro_pyspec_t;

/* ro__pyspec_read checks len bytes of spec and fills *s (freed with
 * ro__pyspec_free, also after a failure). RO_EINVAL with a message naming
 * the field (env names the env). */
int ro__pyspec_read(ro_pyspec_t *s, const uint8_t *spec, uint32_t len, const char *env, char *err,
                    size_t errlen);

/* ro__pyspec_free frees what a spec owns. */
void ro__pyspec_free(ro_pyspec_t *s);

#endif
