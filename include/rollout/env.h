/*
 * rollout env ABI.
 *
 * An environment is a C vtable plus its spaces. Built-in envs (cartpole,
 * pendulum, burn) and plugin envs loaded with dlopen() use the same ABI.
 *
 * A plugin is a shared object that exports one function:
 *
 *     const ro_env_vtable_t *ro_env_plugin(void);
 *
 * built against this header (see examples/plugin_env/ and docs/env-api.md).
 *
 * Threading: one env instance is only ever touched by one thread at a time
 * (the worker running the env actor that owns it), but different instances
 * run concurrently on different threads. An env must therefore keep all of
 * its mutable state in the instance: no global mutable state.
 *
 * Randomness: create() receives a 64-bit seed derived from (run seed, env
 * index). All randomness of the instance (resets, noise) must come from that
 * seed so that an env's trajectory depends only on the seed and the actions.
 */
#ifndef ROLLOUT_ENV_H
#define ROLLOUT_ENV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of the structs below. */
#define RO_ENV_ABI_VERSION 1u

/* The largest number of dimensions of a box space. */
#define RO_SPACE_MAX_DIMS 4

typedef enum ro_space_kind {
    RO_SPACE_DISCRETE = 1, /* integers 0 .. n-1 */
    RO_SPACE_BOX = 2,      /* float32 tensor with a shape and bounds */
} ro_space_kind_t;

/*
 * ro_space_t describes an observation or action space. Observations are
 * always boxes. For a box, `low` and `high` point to `ro_space_size()`
 * floats owned by the env instance (they stay valid until destroy());
 * unbounded dimensions use -INFINITY / INFINITY.
 */
typedef struct ro_space {
    ro_space_kind_t kind;
    uint32_t n;                        /* discrete: number of actions */
    uint32_t ndim;                     /* box: number of dimensions (1..4) */
    uint32_t shape[RO_SPACE_MAX_DIMS]; /* box: extent of each dimension */
    const float *low;                  /* box: lower bounds, row-major */
    const float *high;                 /* box: upper bounds, row-major */
} ro_space_t;

/* ro_space_size returns the number of floats of a box, 1 for discrete. */
static inline size_t ro_space_size(const ro_space_t *s)
{
    if (s->kind != RO_SPACE_BOX)
        return 1;
    size_t n = 1;
    for (uint32_t i = 0; i < s->ndim; i++)
        n *= s->shape[i];
    return n;
}

/* One `--env-arg key=value` pair. Both strings are NUL-terminated. */
typedef struct ro_env_arg {
    const char *key;
    const char *value;
} ro_env_arg_t;

/* The action given to step(): an index for discrete spaces, a pointer to
 * ro_space_size(action space) floats for box spaces (valid during step()). */
typedef union ro_action {
    int32_t discrete;
    const float *box;
} ro_action_t;

/* What one step produced, besides the observation. */
typedef struct ro_step {
    float reward;
    uint8_t terminated; /* the MDP reached a terminal state */
    uint8_t truncated;  /* the env cut the episode for another reason */
} ro_step_t;

typedef struct ro_env_vtable {
    uint32_t abi_version; /* RO_ENV_ABI_VERSION */
    const char *name;     /* short name, e.g. "cartpole" */

    /* NULL-terminated list of the keys create() accepts, each followed by
     * its help text: {"key1", "help1", "key2", "help2", NULL}. The runtime
     * rejects any other key before create() is called. */
    const char *const *arg_keys;

    /*
     * Episode length limit applied by the runtime (the equivalent of
     * Gymnasium's TimeLimit): the step that reaches it reports truncated.
     * 0 means no limit. May be overridden per run by the env arg
     * "max_episode_steps", which every env accepts.
     */
    uint32_t max_episode_steps;

    /*
     * create builds one instance. args holds the user's key/value pairs
     * (already filtered against arg_keys). On success returns 0 and sets
     * *out; on failure returns a negative errno-like code and writes a
     * message naming the problem into err (errlen bytes, NUL-terminated).
     */
    int (*create)(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                  size_t errlen);

    /* spaces fills the observation and action spaces of an instance. */
    void (*spaces)(void *env, ro_space_t *obs, ro_space_t *act);

    /* reset starts a new episode and writes the first observation. */
    void (*reset)(void *env, float *obs);

    /*
     * step applies one action, writes the next observation into obs and the
     * reward and flags into *out. Returns 0, or a negative code if the env
     * failed; the runtime then counts the failure and resets the instance.
     * step() need not handle max_episode_steps: the runtime does.
     */
    int (*step)(void *env, ro_action_t action, float *obs, ro_step_t *out);

    /* destroy frees the instance. */
    void (*destroy)(void *env);
} ro_env_vtable_t;

/* The symbol a plugin exports. */
typedef const ro_env_vtable_t *(*ro_env_plugin_fn)(void);
#define RO_ENV_PLUGIN_SYMBOL "ro_env_plugin"

#ifdef __cplusplus
}
#endif

#endif /* ROLLOUT_ENV_H */
