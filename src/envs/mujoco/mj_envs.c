/*
 * MuJoCo locomotion envs with Gymnasium v5 semantics: inverted_pendulum,
 * hopper, half_cheetah, walker2d (docs/env-api.md lists what each
 * observes, rewards and terminates on, and its args).
 *
 * One shared, read-only mjModel per model per process (mj_runtime.c); one
 * mjData per instance, made at the instance's first reset, which the env
 * actor runs on the worker that steps the instance: the worker is pinned to
 * a CPU, so the pages MuJoCo allocates are placed on that CPU's NUMA node
 * when first touched (the small arena at once, the stack as it is used).
 * The probe instance a shard creates on the main thread to learn the spaces
 * is reset, like every other, on its worker.
 *
 * A step is: check the action (NaN or infinite: -EINVAL, state untouched),
 * set ctrl (MuJoCo clamps it to ctrlrange), mj_step frame_skip times under a
 * guard, then read qpos/qvel. MuJoCo errors inside the step (mju_error) and
 * warnings that mean MuJoCo threw the state away (bad qpos, qvel, qacc: it
 * resets the data itself and carries on) make the step fail, so the runtime
 * counts an env failure and resets the instance. Other warnings (contact or
 * constraint buffers full) are counted per instance.
 */
#include "envs/mujoco/mj_envs.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env_registry.h"
#include "envs/mujoco/mj_registry.h"
#include "envs/mujoco/mj_runtime.h"
#include "error.h"
#include "rng.h"

/* What distinguishes the envs, besides their numbers. */
enum {
    HEALTH = 1u << 0,       /* healthy z and angle ranges; healthy reward; may terminate */
    HEALTH_STATE = 1u << 1, /* also qpos[2:] and qvel within healthy_state_range (hopper) */
    CLIP_QVEL = 1u << 2,    /* observed qvel clipped to [-10, 10] */
    NORMAL_QVEL = 1u << 3,  /* reset: qvel = scale * N(0, 1), not uniform (half_cheetah) */
    FORWARD = 1u << 4,      /* forward reward weight * dx/dt minus control cost */
    UPRIGHT = 1u << 5,      /* reward 1 while |pole angle| <= 0.2, else terminated */
    EXCLUDE_X = 1u << 6,    /* x (qpos[0]) left out of the observation by default */
};

#define QVEL_CLIP 10.0
#define UPRIGHT_LIMIT 0.2
#define MAX_FRAME_SKIP 1000u
#define MAX_WEIGHT 1e6
#define MAX_NOISE 100.0

/* The parameters Gymnasium lets a user set; the defaults are per env. */
typedef struct mj_params {
    uint32_t frame_skip;
    double forward_w, ctrl_w, healthy_w, noise;
    double state_range[2], z_range[2], angle_range[2];
    bool terminate_unhealthy, exclude_x;
} mj_params_t;

typedef struct mj_kind {
    const char *name, *file;
    unsigned flags;
    mj_params_t defaults;
} mj_kind_t;

typedef struct mj_env {
    const mj_kind_t *kind;
    const mjModel *m; /* shared, read-only */
    mjData *d;        /* made at the first reset, on the thread that steps */
    ro_rng_t rng;
    mj_params_t p;
    double dt;
    uint32_t obs_dim, act_dim, skip_x;
    bool must_reset; /* a failed step or reset left d unusable */
    uint64_t warnings, errors;
    float *obs_low, *obs_high, *act_low, *act_high; /* one block, freed with obs_low */
} mj_env_t;

#define INF INFINITY
static const mj_kind_t kinds[] = {
    {"inverted_pendulum",
     "inverted_pendulum.xml",
     UPRIGHT,
     {.frame_skip = 2, .noise = 0.01, .exclude_x = false}},
    {"hopper",
     "hopper.xml",
     HEALTH | HEALTH_STATE | CLIP_QVEL | FORWARD | EXCLUDE_X,
     {.frame_skip = 4,
      .forward_w = 1.0,
      .ctrl_w = 1e-3,
      .healthy_w = 1.0,
      .noise = 5e-3,
      .state_range = {-100.0, 100.0},
      .z_range = {0.7, INF},
      .angle_range = {-0.2, 0.2},
      .terminate_unhealthy = true,
      .exclude_x = true}},
    {"half_cheetah",
     "half_cheetah.xml",
     NORMAL_QVEL | FORWARD | EXCLUDE_X,
     {.frame_skip = 5, .forward_w = 1.0, .ctrl_w = 0.1, .noise = 0.1, .exclude_x = true}},
    {"walker2d",
     "walker2d.xml",
     HEALTH | CLIP_QVEL | FORWARD | EXCLUDE_X,
     {.frame_skip = 4,
      .forward_w = 1.0,
      .ctrl_w = 1e-3,
      .healthy_w = 1.0,
      .noise = 5e-3,
      .z_range = {0.8, 2.0},
      .angle_range = {-1.0, 1.0},
      .terminate_unhealthy = true,
      .exclude_x = true}},
};
enum { K_INVERTED_PENDULUM, K_HOPPER, K_HALF_CHEETAH, K_WALKER2D };

/* ---- args ---- */

typedef enum { ARG_STEPS, ARG_WEIGHT, ARG_NOISE, ARG_BOOL, ARG_RANGE } arg_type_t;

typedef struct arg_def {
    const char *key;
    arg_type_t type;
    size_t off; /* into mj_params_t */
} arg_def_t;

static const arg_def_t arg_defs[] = {
    {"frame_skip", ARG_STEPS, offsetof(mj_params_t, frame_skip)},
    {"forward_reward_weight", ARG_WEIGHT, offsetof(mj_params_t, forward_w)},
    {"ctrl_cost_weight", ARG_WEIGHT, offsetof(mj_params_t, ctrl_w)},
    {"healthy_reward", ARG_WEIGHT, offsetof(mj_params_t, healthy_w)},
    {"reset_noise_scale", ARG_NOISE, offsetof(mj_params_t, noise)},
    {"terminate_when_unhealthy", ARG_BOOL, offsetof(mj_params_t, terminate_unhealthy)},
    {"exclude_current_positions_from_observation", ARG_BOOL, offsetof(mj_params_t, exclude_x)},
    {"healthy_state_range", ARG_RANGE, offsetof(mj_params_t, state_range)},
    {"healthy_z_range", ARG_RANGE, offsetof(mj_params_t, z_range)},
    {"healthy_angle_range", ARG_RANGE, offsetof(mj_params_t, angle_range)},
};

#define H_FRAME_SKIP(dflt) "frame_skip", "mj_step calls per env step, 1..1000 (default " dflt ")"
#define H_FORWARD                                                                                  \
    "forward_reward_weight", "weight of the forward reward dx/dt, a double (default 1)"
#define H_CTRL(dflt)                                                                               \
    "ctrl_cost_weight", "weight of the control cost sum(action^2), a double (default " dflt ")"
#define H_HEALTHY "healthy_reward", "reward for each step taken while healthy (default 1)"
#define H_TERMINATE                                                                                \
    "terminate_when_unhealthy", "true or false: end the episode when unhealthy (default true)"
#define H_Z(dflt) "healthy_z_range", "LO,HI: open range of healthy torso heights (default " dflt ")"
#define H_ANGLE(dflt)                                                                              \
    "healthy_angle_range", "LO,HI: open range of healthy torso angles (default " dflt ")"
#define H_NOISE(what, dflt)                                                                        \
    "reset_noise_scale", "scale of the reset noise on " what ", 0..100 (default " dflt ")"
#define H_EXCLUDE                                                                                  \
    "exclude_current_positions_from_observation",                                                  \
        "true or false: leave x out of the observation (default true)"

static const char *const inverted_pendulum_keys[] = {
    H_FRAME_SKIP("2"), H_NOISE("qpos and qvel, uniform", "0.01"), NULL};
static const char *const hopper_keys[] = {
    H_FRAME_SKIP("4"),
    H_FORWARD,
    H_CTRL("1e-3"),
    H_HEALTHY,
    H_TERMINATE,
    "healthy_state_range",
    "LO,HI: open range for qpos[2:] and qvel (default -100,100)",
    H_Z("0.7,inf"),
    H_ANGLE("-0.2,0.2"),
    H_NOISE("qpos and qvel, uniform", "5e-3"),
    H_EXCLUDE,
    NULL};
static const char *const half_cheetah_keys[] = {
    H_FRAME_SKIP("5"), H_FORWARD, H_CTRL("0.1"), H_NOISE("qpos (uniform) and qvel (normal)", "0.1"),
    H_EXCLUDE,         NULL};
static const char *const walker2d_keys[] = {
    H_FRAME_SKIP("4"), H_FORWARD,    H_CTRL("1e-3"),  H_HEALTHY,
    H_TERMINATE,       H_Z("0.8,2"), H_ANGLE("-1,1"), H_NOISE("qpos and qvel, uniform", "5e-3"),
    H_EXCLUDE,         NULL};

static const char *const *const kind_keys[] = {inverted_pendulum_keys, hopper_keys,
                                               half_cheetah_keys, walker2d_keys};

static bool accepts(const char *const *keys, const char *key)
{
    for (size_t i = 0; keys[i] != NULL; i += 2)
        if (strcmp(keys[i], key) == 0)
            return true;
    return false;
}

/* parse_bound reads one end of a range: a number, or inf / -inf. */
static int parse_bound(const char *key, const char *s, double *out, char *err, size_t errlen)
{
    if (strcmp(s, "inf") == 0 || strcmp(s, "+inf") == 0) {
        *out = INF;
        return 0;
    }
    if (strcmp(s, "-inf") == 0) {
        *out = -INF;
        return 0;
    }
    return ro__env_arg_double(key, s, -1e300, 1e300, out, err, errlen);
}

/* parse_range reads "LO,HI" with LO < HI (Gymnasium's tuple). */
static int parse_range(const char *key, const char *value, double r[2], char *err, size_t errlen)
{
    const char *comma = strchr(value, ',');
    char lo[64];
    size_t n = comma ? (size_t)(comma - value) : 0;
    if (comma == NULL || n >= sizeof lo || strchr(comma + 1, ',') != NULL)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env arg '%s': '%s' is not LO,HI (two numbers or inf, e.g. 0.7,inf)", key,
                          value);
    memcpy(lo, value, n);
    lo[n] = '\0';
    double a, b;
    int rc = parse_bound(key, lo, &a, err, errlen);
    if (rc == 0)
        rc = parse_bound(key, comma + 1, &b, err, errlen);
    if (rc < 0)
        return rc;
    if (!(a < b))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env arg '%s': '%s' is an empty range (LO must be below HI)", key, value);
    r[0] = a;
    r[1] = b;
    return 0;
}

static int parse_bool(const char *key, const char *value, bool *out, char *err, size_t errlen)
{
    if (!strcmp(value, "true") || !strcmp(value, "True") || !strcmp(value, "1")) {
        *out = true;
        return 0;
    }
    if (!strcmp(value, "false") || !strcmp(value, "False") || !strcmp(value, "0")) {
        *out = false;
        return 0;
    }
    return ro__errorf(err, errlen, RO_EINVAL, "env arg '%s': '%s' is not true or false", key,
                      value);
}

static int parse_arg(const arg_def_t *def, const char *value, mj_params_t *p, char *err,
                     size_t errlen)
{
    char *field = (char *)p + def->off;
    switch (def->type) {
    case ARG_STEPS:
        return ro__env_arg_u32(def->key, value, 1, MAX_FRAME_SKIP, (uint32_t *)field, err, errlen);
    case ARG_WEIGHT:
        return ro__env_arg_double(def->key, value, -MAX_WEIGHT, MAX_WEIGHT, (double *)field, err,
                                  errlen);
    case ARG_NOISE:
        return ro__env_arg_double(def->key, value, 0.0, MAX_NOISE, (double *)field, err, errlen);
    case ARG_BOOL:
        return parse_bool(def->key, value, (bool *)field, err, errlen);
    case ARG_RANGE:
        return parse_range(def->key, value, (double *)field, err, errlen);
    }
    return RO_EINVAL;
}

static int parse_args(const mj_kind_t *k, const char *const *keys, const ro_env_arg_t *args,
                      size_t nargs, mj_params_t *p, char *err, size_t errlen)
{
    *p = k->defaults;
    for (size_t i = 0; i < nargs; i++) {
        const arg_def_t *def = NULL;
        for (size_t j = 0; j < sizeof arg_defs / sizeof arg_defs[0]; j++)
            if (strcmp(arg_defs[j].key, args[i].key) == 0)
                def = &arg_defs[j];
        if (def == NULL || !accepts(keys, args[i].key))
            return ro__errorf(err, errlen, RO_EINVAL, "env '%s' has no arg '%s'", k->name,
                              args[i].key);
        int rc = parse_arg(def, args[i].value, p, err, errlen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- the env ---- */

static int mj_create(const mj_kind_t *k, const char *const *keys, void **out,
                     const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                     size_t errlen)
{
    mj_params_t p;
    int rc = parse_args(k, keys, args, nargs, &p, err, errlen);
    if (rc < 0)
        return rc;
    const mjModel *m;
    rc = ro__mj_model_acquire(k->file, &m, err, errlen);
    if (rc < 0)
        return rc;

    mj_env_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        goto oom;
    e->kind = k;
    e->m = m;
    e->p = p;
    e->dt = m->opt.timestep * p.frame_skip;
    e->skip_x = (k->flags & EXCLUDE_X) && p.exclude_x;
    e->obs_dim = (uint32_t)(m->nq - (int)e->skip_x + m->nv);
    e->act_dim = (uint32_t)m->nu;
    e->obs_low = malloc(2 * ((size_t)e->obs_dim + e->act_dim) * sizeof(float));
    if (e->obs_low == NULL)
        goto oom;
    e->obs_high = e->obs_low + e->obs_dim;
    e->act_low = e->obs_high + e->obs_dim;
    e->act_high = e->act_low + e->act_dim;
    for (uint32_t i = 0; i < e->obs_dim; i++) {
        e->obs_low[i] = -INF;
        e->obs_high[i] = INF;
    }
    /* The action box is the actuators' control range, as Gymnasium's. */
    for (uint32_t j = 0; j < e->act_dim; j++) {
        e->act_low[j] = (float)m->actuator_ctrlrange[2 * j];
        e->act_high[j] = (float)m->actuator_ctrlrange[2 * j + 1];
    }
    ro__rng_init(&e->rng, seed);
    *out = e;
    return 0;

oom:
    if (e != NULL)
        free(e->obs_low);
    free(e);
    ro__mj_model_release(m);
    return ro__errorf(err, errlen, RO_ENOMEM, "env '%s': out of memory", k->name);
}

static void mj_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    mj_env_t *e = env;
    *obs = (ro_space_t){.kind = RO_SPACE_BOX,
                        .ndim = 1,
                        .shape = {e->obs_dim},
                        .low = e->obs_low,
                        .high = e->obs_high};
    *act = (ro_space_t){.kind = RO_SPACE_BOX,
                        .ndim = 1,
                        .shape = {e->act_dim},
                        .low = e->act_low,
                        .high = e->act_high};
}

static void write_obs(const mj_env_t *e, float *obs)
{
    const mjData *d = e->d;
    const int nq = e->m->nq, nv = e->m->nv;
    const bool clip = e->kind->flags & CLIP_QVEL;
    size_t k = 0;
    for (int i = (int)e->skip_x; i < nq; i++)
        obs[k++] = (float)d->qpos[i];
    for (int i = 0; i < nv; i++) {
        double v = d->qvel[i];
        if (clip) /* as np.clip: NaN stays NaN */
            v = v < -QVEL_CLIP ? -QVEL_CLIP : v > QVEL_CLIP ? QVEL_CLIP : v;
        obs[k++] = (float)v;
    }
}

static void make_data_call(void *arg)
{
    mj_env_t *e = arg;
    e->d = mj_makeData(e->m);
}

static void forward_call(void *arg)
{
    mj_env_t *e = arg;
    mj_forward(e->m, e->d);
}

static void step_call(void *arg)
{
    mj_env_t *e = arg;
    for (uint32_t i = 0; i < e->p.frame_skip; i++)
        mj_step(e->m, e->d);
}

/* make_data makes the instance's mjData on the calling thread (the worker
 * that steps it). mj_makeData clears the whole buffer (mj_resetData), so its
 * pages are placed on this thread's node now; the stack's pages are placed
 * as the steps first use them, on the same thread. */
static int make_data(mj_env_t *e)
{
    if (ro__mj_guard(make_data_call, e) != 0 || e->d == NULL) {
        e->errors++;
        e->d = NULL; /* a failed mj_makeData may leak; it does not leave a half data */
        return RO_ENOMEM;
    }
    return 0;
}

static void mj_reset(void *env, float *obs)
{
    mj_env_t *e = env;
    e->must_reset = false;
    if (e->d == NULL && make_data(e) < 0) {
        /* No data: the episode cannot start. The next step fails, and the
         * runtime resets the instance again, which retries. */
        e->must_reset = true;
        memset(obs, 0, e->obs_dim * sizeof(float));
        return;
    }
    const mjModel *m = e->m;
    mjData *d = e->d;
    mj_resetData(m, d);
    /* Gymnasium's reset_model: init_qpos (= qpos0) plus uniform noise in
     * [-scale, scale), all of qpos drawn first, then qvel (init_qvel = 0). */
    const double s = e->p.noise;
    for (int i = 0; i < m->nq; i++)
        d->qpos[i] = m->qpos0[i] + ro__rng_uniform(&e->rng, -s, s);
    for (int i = 0; i < m->nv; i++)
        d->qvel[i] = (e->kind->flags & NORMAL_QVEL) ? s * ro__rng_normal(&e->rng)
                                                    : ro__rng_uniform(&e->rng, -s, s);
    /* set_state's mj_forward: the derived quantities of the new state. */
    if (ro__mj_guard(forward_call, e) != 0) {
        e->errors++;
        e->must_reset = true;
    }
    write_obs(e, obs);
}

static bool in_open(double x, const double r[2])
{
    return r[0] < x && x < r[1];
}

/* is_healthy: Gymnasium's is_healthy for hopper and walker2d (open ranges;
 * z = qpos[1], angle = qpos[2]; hopper also checks qpos[2:] and qvel). */
static bool is_healthy(const mj_env_t *e)
{
    const mjData *d = e->d;
    bool ok = in_open(d->qpos[1], e->p.z_range) && in_open(d->qpos[2], e->p.angle_range);
    if (e->kind->flags & HEALTH_STATE) {
        for (int i = 2; i < e->m->nq; i++)
            ok = ok && in_open(d->qpos[i], e->p.state_range);
        for (int i = 0; i < e->m->nv; i++)
            ok = ok && in_open(d->qvel[i], e->p.state_range);
    }
    return ok;
}

/* MuJoCo warnings after which it has reset the data itself: the step's
 * result is not a state the actions led to. */
static bool state_discarded(const mjData *d, const int before[mjNWARNING])
{
    return d->warning[mjWARN_BADQPOS].number > before[mjWARN_BADQPOS] ||
           d->warning[mjWARN_BADQVEL].number > before[mjWARN_BADQVEL] ||
           d->warning[mjWARN_BADQACC].number > before[mjWARN_BADQACC];
}

static int mj_step_env(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    mj_env_t *e = env;
    if (e->d == NULL || e->must_reset)
        return e->d == NULL ? RO_ENOMEM : RO_EIO;
    const mjModel *m = e->m;
    mjData *d = e->d;

    /* The control cost is Gymnasium's sum(action^2), on the action as
     * given; MuJoCo clamps ctrl to ctrlrange for the physics. */
    double ctrl_sq = 0.0;
    for (uint32_t j = 0; j < e->act_dim; j++) {
        double a = action.box[j];
        if (!isfinite(a))
            return RO_EINVAL;
        ctrl_sq += a * a;
    }
    for (uint32_t j = 0; j < e->act_dim; j++)
        d->ctrl[j] = action.box[j];

    int before[mjNWARNING];
    for (int w = 0; w < mjNWARNING; w++)
        before[w] = d->warning[w].number;
    const double x_before = d->qpos[0];
    if (ro__mj_guard(step_call, e) != 0) {
        e->errors++;
        e->must_reset = true;
        return RO_EIO;
    }
    for (int w = 0; w < mjNWARNING; w++)
        if (d->warning[w].number > before[w])
            e->warnings += (uint64_t)(d->warning[w].number - before[w]);
    if (state_discarded(d, before)) {
        e->must_reset = true;
        return RO_ERANGE;
    }

    write_obs(e, obs);
    const unsigned f = e->kind->flags;
    bool terminated = false;
    double reward = 0.0;
    if (f & UPRIGHT) {
        /* InvertedPendulum-v5: terminated when the observation is not
         * finite or |angle| > 0.2; reward 1 only for a step that is not. */
        bool finite = true;
        for (int i = 0; i < m->nq; i++)
            finite = finite && isfinite(d->qpos[i]);
        for (int i = 0; i < m->nv; i++)
            finite = finite && isfinite(d->qvel[i]);
        terminated = !finite || fabs(d->qpos[1]) > UPRIGHT_LIMIT;
        reward = terminated ? 0.0 : 1.0;
    }
    if (f & FORWARD) {
        const double x_velocity = (d->qpos[0] - x_before) / e->dt;
        double healthy_reward = 0.0;
        if (f & HEALTH) {
            const bool healthy = is_healthy(e);
            healthy_reward = healthy ? e->p.healthy_w : 0.0;
            terminated = !healthy && e->p.terminate_unhealthy;
        }
        /* Gymnasium's order: (forward + healthy) - ctrl_cost. */
        reward = (e->p.forward_w * x_velocity + healthy_reward) - e->p.ctrl_w * ctrl_sq;
    }
    out->reward = (float)reward;
    out->terminated = terminated;
    out->truncated = 0;
    return 0;
}

static void mj_destroy(void *env)
{
    mj_env_t *e = env;
    if (e->d != NULL)
        mj_deleteData(e->d);
    ro__mj_model_release(e->m);
    free(e->obs_low);
    free(e);
}

const mjModel *ro__mj_env_model(const void *env)
{
    return ((const mj_env_t *)env)->m;
}

mjData *ro__mj_env_data(void *env)
{
    return ((mj_env_t *)env)->d;
}

double ro__mj_env_dt(const void *env)
{
    return ((const mj_env_t *)env)->dt;
}

uint64_t ro__mj_env_warnings(const void *env)
{
    return ((const mj_env_t *)env)->warnings;
}

uint64_t ro__mj_env_errors(const void *env)
{
    return ((const mj_env_t *)env)->errors;
}

#define MJ_VTABLE(id, kname, steps)                                                                \
    static int kname##_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,   \
                              char *err, size_t errlen)                                            \
    {                                                                                              \
        return mj_create(&kinds[id], kind_keys[id], out, args, nargs, seed, err, errlen);          \
    }                                                                                              \
    const ro_env_vtable_t ro__env_##kname = {                                                      \
        .abi_version = RO_ENV_ABI_VERSION,                                                         \
        .name = #kname,                                                                            \
        .arg_keys = kname##_keys,                                                                  \
        .max_episode_steps = steps,                                                                \
        .create = kname##_create,                                                                  \
        .spaces = mj_spaces,                                                                       \
        .reset = mj_reset,                                                                         \
        .step = mj_step_env,                                                                       \
        .destroy = mj_destroy,                                                                     \
    }

/* Gymnasium registers all four with a 1000-step TimeLimit. */
MJ_VTABLE(K_INVERTED_PENDULUM, inverted_pendulum, 1000);
MJ_VTABLE(K_HOPPER, hopper, 1000);
MJ_VTABLE(K_HALF_CHEETAH, half_cheetah, 1000);
MJ_VTABLE(K_WALKER2D, walker2d, 1000);
