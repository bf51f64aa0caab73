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
 *
 * Two ABI versions live here. ABI 1 (ro_env_vtable_t, exported by
 * ro_env_plugin()): one float32 box observation, one discrete or box action,
 * one agent. ABI 2 (ro_env2_vtable_t, exported by ro_env2_plugin()): named
 * typed observation tensors, composite actions with an optional mask,
 * several agents, per-episode metrics. The runtime loads both; a plugin
 * exports one of the two (if both, ABI 2 wins). docs/env-api.md.
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
    /* ABI 2 action parts only: */
    RO_SPACE_MULTI_DISCRETE = 3, /* n integers, entry i in 0 .. nvec[i]-1 */
    RO_SPACE_MULTI_BINARY = 4,   /* n integers, each 0 or 1 */
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

/* ---------------------------------------------------------------------- */
/* Env state (optional, both ABIs; docs/env-api.md "Env state")           */
/* ---------------------------------------------------------------------- */

/*
 * An env that can save and restore its state lets rollout-replay seek and
 * fork recordings, recordings carry snapshots (--snapshot-every) and Python
 * restart episodes from saved states. The state is everything that decides
 * what the instance does next: its simulation state, its counters and its
 * RNG state, so that loading a saved state and applying the same actions
 * gives the same observations, rewards and flags bit for bit (resets
 * included). It need not hold what create() derives from the env args (the
 * runtime only loads a state into an instance made with the same args).
 *
 * The three functions, on the thread that owns the instance:
 *
 * state_size returns the bytes of the instance's state, at most
 *   RO_ENV_STATE_MAX; the same value for the instance's whole life.
 * save_state writes the state into buf (len = state_size(env) bytes);
 *   0, or a negative code if it cannot (the runtime reports it).
 * load_state replaces the instance's state by buf (len = state_size(env)
 *   bytes), as saved by an instance of the same env made with the same
 *   args. The runtime has checked the blob's header (env name, args, size)
 *   before; the bytes themselves may still come from a hostile file, so an
 *   env checks whatever in them could make it read or write out of bounds
 *   (an index, a length) and returns a negative code for such a state. After
 *   a failed load the runtime resets the instance before stepping it.
 *
 * The runtime may call save_state between any two calls of reset/step
 * (also before the first reset: the state of a fresh instance). An ABI 2
 * env sets the three fields at the end of ro_env2_vtable_t; an ABI 1
 * plugin, whose vtable cannot grow, exports one more function,
 * ro_env_state_plugin(), returning a ro_env_state_ops_t. Plugins without
 * them keep working: they cannot be snapshotted, sought or forked, and
 * those features say so by name.
 */
#define RO_ENV_STATE_VERSION 1u      /* of ro_env_state_ops_t */
#define RO_ENV_STATE_MAX (64u << 20) /* the largest state_size() */

typedef struct ro_env_state_ops {
    uint32_t version; /* RO_ENV_STATE_VERSION */
    uint32_t size;    /* sizeof(ro_env_state_ops_t) as the plugin was built */
    size_t (*state_size)(void *env);
    int (*save_state)(void *env, void *buf, size_t len);
    int (*load_state)(void *env, const void *buf, size_t len);
} ro_env_state_ops_t;

/* The optional symbol of an ABI 1 plugin with state support. */
typedef const ro_env_state_ops_t *(*ro_env_state_plugin_fn)(void);
#define RO_ENV_STATE_PLUGIN_SYMBOL "ro_env_state_plugin"

/* ---------------------------------------------------------------------- */
/* ABI 2                                                                  */
/* ---------------------------------------------------------------------- */

/* The major version of ro_env2_vtable_t. Compatible additions do not bump
 * it: they append fields, which the `size` fields below tell apart. */
#define RO_ENV_ABI2_VERSION 2u

/* Limits of an ABI 2 env's spaces (the runtime refuses more). */
#define RO_ENV_MAX_TENSORS 8   /* observation tensors */
#define RO_ENV_MAX_PARTS 8     /* parts of a Tuple action */
#define RO_ENV_MAX_METRICS 8   /* per-episode metrics */
#define RO_ENV_MAX_AGENTS 1024 /* agents of one env */
#define RO_ENV_MAX_NAME 32     /* bytes of a tensor or metric name, NUL included */

typedef enum ro_dtype {
    RO_DTYPE_UINT8 = 1,   /* 1 byte; the C MLP scales it to [0, 1] (x / 255) */
    RO_DTYPE_INT32 = 2,   /* 4 bytes, host order; the C MLP reads it as a float */
    RO_DTYPE_FLOAT32 = 3, /* 4 bytes, host order */
} ro_dtype_t;

/*
 * ro_tensor_space_t is one named observation tensor of one agent. name is
 * 1..RO_ENV_MAX_NAME-1 characters of [A-Za-z0-9_], unique within the env.
 * low/high are optional (both NULL: unbounded, or 0..255 for uint8); when
 * set they point to ro_tensor_space_size() floats owned by the env instance
 * (valid until destroy()), as for ABI 1 boxes.
 */
typedef struct ro_tensor_space {
    const char *name;
    ro_dtype_t dtype;
    uint32_t ndim;                     /* 1..RO_SPACE_MAX_DIMS */
    uint32_t shape[RO_SPACE_MAX_DIMS]; /* each >= 1 */
    const float *low, *high;           /* optional bounds, row-major */
} ro_tensor_space_t;

/* ro_tensor_space_size returns the elements of one agent's tensor. */
static inline size_t ro_tensor_space_size(const ro_tensor_space_t *t)
{
    size_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/*
 * ro_action_part_t is one part of an action (a Tuple has several):
 *   RO_SPACE_DISCRETE        n actions: 1 integer in 0 .. n-1
 *   RO_SPACE_MULTI_DISCRETE  n integers, entry i in 0 .. nvec[i]-1
 *   RO_SPACE_MULTI_BINARY    n integers, each 0 or 1 (a MultiDiscrete of 2s)
 *   RO_SPACE_BOX             ndim/shape/low/high as an ABI 1 box (floats)
 * nvec, low and high point to memory of the env instance, valid until
 * destroy().
 */
typedef struct ro_action_part {
    ro_space_kind_t kind;
    uint32_t n;                        /* discrete: actions; multi-*: entries */
    const uint32_t *nvec;              /* multi-discrete: n counts, each >= 1 */
    uint32_t ndim;                     /* box */
    uint32_t shape[RO_SPACE_MAX_DIMS]; /* box */
    const float *low, *high;           /* box: bounds, row-major */
} ro_action_part_t;

/*
 * ro_env_spaces_t: what spaces() reports. The runtime zeroes it and sets
 * `size` to sizeof(ro_env_spaces_t) as the runtime was built; a plugin
 * built against a newer header writes a field past the runtime's size only
 * if `size` covers it (fields are only ever appended).
 *
 * The action mask (action_mask = 1): one uint8 per possible value of every
 * discrete entry, in part order (Discrete n: n bytes; MultiDiscrete: nvec[0]
 * + nvec[1] + ... bytes; MultiBinary n: 2 bytes per entry, for 0 and 1);
 * nonzero = allowed. Box parts have no mask bytes. Every discrete entry must
 * leave at least one value allowed (docs/env-api.md says what happens if
 * not).
 */
typedef struct ro_env_spaces {
    uint32_t size;       /* set by the runtime: bytes of this struct it knows */
    uint32_t num_agents; /* >= 1 (0 reads as 1): rows of the batch per env */
    uint32_t num_obs;    /* 1..RO_ENV_MAX_TENSORS */
    ro_tensor_space_t obs[RO_ENV_MAX_TENSORS];
    uint32_t num_parts; /* 1..RO_ENV_MAX_PARTS; more than 1 is a Tuple */
    ro_action_part_t act[RO_ENV_MAX_PARTS];
    uint32_t action_mask; /* 1: reset() and step() write a mask; 0: none */
} ro_env_spaces_t;

/*
 * Where reset() and step() write one env's observation. tensors[k] points
 * to num_agents x ro_tensor_space_size(obs[k]) elements of obs[k].dtype,
 * agent after agent (row-major [agents, shape...]); mask, when the env
 * declared one, to num_agents x mask width bytes, else NULL. The runtime
 * owns the memory; it is valid during the call only.
 */
typedef struct ro_obs_out {
    void *const *tensors; /* [num_obs] */
    uint8_t *mask;
} ro_obs_out_t;

/*
 * The actions given to step(), valid during the call. discrete holds, for
 * agent after agent, every discrete entry in part order (Discrete: 1,
 * MultiDiscrete and MultiBinary: n each); box every box part's floats in
 * part order, agent after agent. Either is NULL when no part uses it.
 */
typedef struct ro_actions {
    const int32_t *discrete; /* [num_agents x discrete entries] */
    const float *box;        /* [num_agents x box floats] */
} ro_actions_t;

typedef struct ro_env2_vtable {
    uint32_t abi_version; /* RO_ENV_ABI2_VERSION */
    uint32_t size;        /* sizeof(ro_env2_vtable_t) as the plugin was built */
    const char *name;
    const char *const *arg_keys; /* as ABI 1 */
    uint32_t max_episode_steps;  /* as ABI 1 */

    /* As ABI 1. */
    int (*create)(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                  size_t errlen);

    /* spaces fills *out (zeroed, size set, by the runtime). Called once per
     * instance; every instance of a kind must report the same spaces. */
    void (*spaces)(void *env, ro_env_spaces_t *out);

    /* reset starts a new episode of every agent: first observations (and
     * mask) into obs. */
    void (*reset)(void *env, const ro_obs_out_t *obs);

    /*
     * step applies one action per agent, writes the next observations (and
     * mask) into obs and each agent's reward and flags into out[agent].
     * The episode of the env ends, for every agent, in the step where any
     * agent reports terminated or truncated (the runtime marks the others
     * truncated). Returns 0, or a negative code if the env failed (the
     * runtime counts it and resets the instance).
     */
    int (*step)(void *env, const ro_actions_t *act, const ro_obs_out_t *obs, ro_step_t *out);

    void (*destroy)(void *env);

    /* Optional (NULL: none). metric_names: a NULL-terminated list of at
     * most RO_ENV_MAX_METRICS names (rules as tensor names).
     * episode_metrics: called when an episode ends, before the reset,
     * writing one float per name; NaN: not reported for this episode. The
     * node reports each metric's mean over the episodes that reported it. */
    const char *const *metric_names;
    void (*episode_metrics)(void *env, float *values);

    /* Optional env state (all three or none; NULL or past `size`: none).
     * As ro_env_state_ops_t above. */
    size_t (*state_size)(void *env);
    int (*save_state)(void *env, void *buf, size_t len);
    int (*load_state)(void *env, const void *buf, size_t len);
} ro_env2_vtable_t;

/* The symbol an ABI 2 plugin exports. */
typedef const ro_env2_vtable_t *(*ro_env2_plugin_fn)(void);
#define RO_ENV2_PLUGIN_SYMBOL "ro_env2_plugin"

#ifdef __cplusplus
}
#endif

#endif /* ROLLOUT_ENV_H */
