/*
 * The env a trajectory file was recorded with, re-created for rollout-replay
 * (--verify and --serve alike): the built-in the header names, or the
 * --plugin the command line gives (never a plugin because the file names
 * one), checked to be the recorded env, with the recorded args and spaces
 * checked as the node checks them.
 */
#ifndef RO_RECORDED_ENV_H
#define RO_RECORDED_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "envs/registry.h"
#include "rollout.pb-c.h"
#include "spaces/layout.h"

typedef struct ro_recorded_env {
    ro_env_kind_t kind;                 /* kind.vt2 set: an env ABI 2 env (format version 2) */
    ro_env_arg_t args[RO_MAX_ENV_ARGS]; /* point into the header */
    size_t nargs;
    ro_space_layout_t layout; /* ABI 2: the re-created env's, checked against the header's */
} ro_recorded_env_t;

/* ro__recorded_env_check_mujoco: a built-in MuJoCo env's recording re-steps
 * the same only on the MuJoCo it was recorded with (MuJoCo's results differ
 * across versions): 0 when the header names this build's MuJoCo, or none
 * (any other env; files from before the field), else RO_ENOTSUP naming both
 * versions. For --verify, which re-steps; serving a recording does not. */
int ro__recorded_env_check_mujoco(const ro_recorded_env_t *e,
                                  const Rollout__V1__TrajectoryHeader *h, char *err, size_t errlen);

/* ro__recorded_env_open opens the env of header h into e: plugin (the
 * command line's --plugin, or NULL) or the built-in named h->env. A
 * version 2 header (its layout) needs an ABI 2 plugin whose layout is the
 * recorded one; a version 1 header an ABI 1 env. Returns 0, or a negative
 * code with one line in err. */
int ro__recorded_env_open(ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                          const char *plugin, char *err, size_t errlen);

/* ro__recorded_env_create makes env i as the node made it (its seed from
 * the header's run seed and node index, ro__node_seed). Returns 0 or a negative code with err. */
int ro__recorded_env_create(const ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                            uint32_t i, void **out, char *err, size_t errlen);

/* ro__recorded_env_destroy destroys an instance made by create. */
void ro__recorded_env_destroy(const ro_recorded_env_t *e, void *env);

/* ro__recorded_env_close closes the env kind and frees the layout. */
void ro__recorded_env_close(ro_recorded_env_t *e);

#endif
