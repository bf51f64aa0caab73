/*
 * An example env plugin: Gymnasium's MountainCar-v0, built against the
 * installed <rollout/env.h> only, as your own env would be.
 *
 *     gcc -O2 -shared -fPIC -I<prefix>/include mountaincar.c -o libmountaincar.so -lm
 *     rollout-node --env ./libmountaincar.so
 *
 * Everything the env changes lives in its instance (the runtime steps many
 * instances on many threads at once), and all its randomness comes from the
 * seed create() receives, so a run can be replayed.
 */
#include <rollout/env.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORCE 0.001
#define GRAVITY 0.0025
#define MIN_POSITION -1.2
#define MAX_POSITION 0.6
#define MAX_SPEED 0.07
#define GOAL_POSITION 0.5

typedef struct mountaincar {
    uint64_t rng; /* splitmix64 state: small, and good enough for resets */
    double goal_velocity;
    double position, velocity;
    float low[2], high[2];
} mountaincar_t;

/* Keys with their help text; "max_episode_steps" is the runtime's own. */
static const char *const arg_keys[] = {
    "goal_velocity",
    "velocity the car must have at the goal, a double (default 0)",
    NULL,
};

/* next_u64 is splitmix64 (Steele, Lea and Flood, 2014). */
static uint64_t next_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* uniform returns a double in [lo, hi) from the top 53 bits. */
static double uniform(uint64_t *state, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(next_u64(state) >> 11) * 0x1.0p-53);
}

static int mc_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                     size_t errlen)
{
    double goal_velocity = 0.0;
    for (size_t i = 0; i < nargs; i++) {
        if (strcmp(args[i].key, "goal_velocity") != 0) {
            snprintf(err, errlen, "mountaincar has no arg '%s'", args[i].key);
            return -EINVAL;
        }
        /* Whole string, finite: an arg that is half a number is a typo. */
        char *end = NULL;
        goal_velocity = strtod(args[i].value, &end);
        if (end == args[i].value || *end != '\0' || !isfinite(goal_velocity)) {
            snprintf(err, errlen, "mountaincar: goal_velocity '%s' is not a number", args[i].value);
            return -EINVAL;
        }
    }

    mountaincar_t *mc = calloc(1, sizeof *mc);
    if (mc == NULL) {
        snprintf(err, errlen, "mountaincar: out of memory");
        return -ENOMEM;
    }
    mc->rng = seed;
    mc->goal_velocity = goal_velocity;
    mc->low[0] = (float)MIN_POSITION;
    mc->low[1] = (float)-MAX_SPEED;
    mc->high[0] = (float)MAX_POSITION;
    mc->high[1] = (float)MAX_SPEED;
    *out = mc;
    return 0;
}

static void mc_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    mountaincar_t *mc = env;
    memset(obs, 0, sizeof *obs);
    obs->kind = RO_SPACE_BOX;
    obs->ndim = 1;
    obs->shape[0] = 2;
    obs->low = mc->low;
    obs->high = mc->high;
    memset(act, 0, sizeof *act);
    act->kind = RO_SPACE_DISCRETE;
    act->n = 3; /* 0: push left, 1: no push, 2: push right */
}

static void mc_reset(void *env, float *obs)
{
    mountaincar_t *mc = env;
    mc->position = uniform(&mc->rng, -0.6, -0.4);
    mc->velocity = 0.0;
    obs[0] = (float)mc->position;
    obs[1] = (float)mc->velocity;
}

static int mc_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    mountaincar_t *mc = env;
    if (action.discrete < 0 || action.discrete > 2)
        return -EINVAL; /* the runtime counts it and resets this instance */

    double v = mc->velocity + (action.discrete - 1) * FORCE + cos(3 * mc->position) * -GRAVITY;
    v = fmin(fmax(v, -MAX_SPEED), MAX_SPEED);
    double p = mc->position + v;
    p = fmin(fmax(p, MIN_POSITION), MAX_POSITION);
    /* The left wall is inelastic. */
    if (p == MIN_POSITION && v < 0)
        v = 0.0;
    mc->position = p;
    mc->velocity = v;

    obs[0] = (float)p;
    obs[1] = (float)v;
    out->reward = -1.0f;
    out->terminated = p >= GOAL_POSITION && v >= mc->goal_velocity;
    out->truncated = 0; /* the runtime applies max_episode_steps */
    return 0;
}

static void mc_destroy(void *env)
{
    free(env);
}

/*
 * Env state (rollout/env.h "Env state"): the RNG, position and velocity,
 * in host order. goal_velocity comes from the args (the runtime loads a
 * state only into an instance made with the same args). ABI 1 vtables
 * cannot grow, so the state functions come from a second exported symbol.
 */
typedef struct mc_state {
    uint64_t rng;
    double position, velocity;
} mc_state_t;

static size_t mc_state_size(void *env)
{
    (void)env;
    return sizeof(mc_state_t);
}

static int mc_save_state(void *env, void *buf, size_t len)
{
    const mountaincar_t *m = env;
    if (len != sizeof(mc_state_t))
        return -EINVAL;
    mc_state_t s = {.rng = m->rng, .position = m->position, .velocity = m->velocity};
    memcpy(buf, &s, sizeof s);
    return 0;
}

static int mc_load_state(void *env, const void *buf, size_t len)
{
    mountaincar_t *m = env;
    if (len != sizeof(mc_state_t))
        return -EINVAL;
    mc_state_t s;
    memcpy(&s, buf, sizeof s);
    m->rng = s.rng;
    m->position = s.position;
    m->velocity = s.velocity;
    return 0;
}

static const ro_env_state_ops_t state_ops = {
    .version = RO_ENV_STATE_VERSION,
    .size = sizeof(ro_env_state_ops_t),
    .state_size = mc_state_size,
    .save_state = mc_save_state,
    .load_state = mc_load_state,
};

static const ro_env_vtable_t vtable = {
    .abi_version = RO_ENV_ABI_VERSION,
    .name = "mountaincar",
    .arg_keys = arg_keys,
    .max_episode_steps = 200,
    .create = mc_create,
    .spaces = mc_spaces,
    .reset = mc_reset,
    .step = mc_step,
    .destroy = mc_destroy,
};

/* ro_env_plugin is the one symbol the runtime looks up after dlopen(). */
const ro_env_vtable_t *ro_env_plugin(void)
{
    return &vtable;
}

/* ro_env_state_plugin (optional) gives the runtime the state functions. */
const ro_env_state_ops_t *ro_env_state_plugin(void);

const ro_env_state_ops_t *ro_env_state_plugin(void)
{
    return &state_ops;
}
