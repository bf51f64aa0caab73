/*
 * MuJoCo locomotion envs with Gymnasium v5 semantics: inverted_pendulum,
 * hopper, half_cheetah, walker2d, ant (docs/env-api.md lists what each
 * observes, rewards and terminates on, and its args).
 *
 * One shared, read-only mjModel per model per process (mj_runtime.c); one
 * mjData per instance, made at the instance's first reset, which the env
 * actor runs on the worker that steps the instance: the worker is pinned to
 * a CPU, so the pages MuJoCo allocates are placed on that CPU's NUMA node
 * when first touched (the state at once, the arena as it is used).
 * The probe instance a shard creates on the main thread to learn the spaces
 * is reset, like every other, on its worker.
 *
 * A step is: check the action (NaN or infinite: -EINVAL, state untouched),
 * set ctrl (MuJoCo clamps it to ctrlrange), mj_step frame_skip times, each
 * under a guard and a part of its own (envs/step_part.h: the vector engine
 * spreads them over its threads), then read qpos/qvel. MuJoCo errors inside the step (mju_error)
 * and warnings that mean MuJoCo threw the state away (bad qpos, qvel, qacc: it resets the data
 * itself and carries on) make the step fail, so the runtime counts an env failure and resets the
 * instance. Other warnings (contact or constraint buffers full) are counted per instance.
 */
#include "envs/mujoco/mj_envs.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "envs/builtin_env.h"
#include "envs/mujoco/mj_args.h"
#include "envs/mujoco/mj_npsum.h"
#include "envs/mujoco/mj_registry.h"
#include "envs/mujoco/mj_runtime.h"
#include "runtime/error.h"
#include "runtime/rng.h"

/* What distinguishes the envs, besides their numbers. */
enum {
    HEALTH = 1u << 0,       /* healthy z and angle ranges; healthy reward; may terminate */
    HEALTH_STATE = 1u << 1, /* also qpos[2:] and qvel within healthy_state_range (hopper) */
    CLIP_QVEL = 1u << 2,    /* observed qvel clipped to [-10, 10] */
    NORMAL_QVEL = 1u << 3,  /* reset: qvel = scale * N(0, 1), not uniform (cheetah, ant) */
    FORWARD = 1u << 4,      /* forward reward weight * dx/dt minus control (ant: + contact) cost */
    UPRIGHT = 1u << 5,      /* reward 1 while |pole angle| <= 0.2, else terminated */
    EXCLUDE_X = 1u << 6,    /* x (ant: x and y) left out of the observation by default */
    ANT = 1u << 7,          /* free root body (x, y, z, quaternion); contact forces observed and
                               costed; dx/dt of main_body's frame; healthy = finite state and z
                               in a closed range */
};

#define QVEL_CLIP 10.0
#define UPRIGHT_LIMIT 0.2

typedef struct mj_kind {
    const char *name, *file;
    unsigned flags;
    ro_mj_params_t defaults;
} mj_kind_t;

/* An instance. Only the thread running it touches it (one at a time: the
 * env ABI's rule); the model it points to is shared and read-only. */
typedef struct mj_env {
    const mj_kind_t *kind;
    const mjModel *m; /* shared, read-only */
    mjData *d;        /* made at the first reset, on the thread that steps */
    ro_rng_t rng;
    ro_mj_params_t p;
    double dt;
    uint32_t obs_dim, act_dim, skip_x; /* skip_x: leading qpos left out */
    bool must_reset;                   /* a failed step or reset left d unusable */
    int main_body;                     /* ant: the body whose xpos gives dx */
    uint64_t warnings, errors;
    ro_mj_terms_t terms; /* the last step's reward terms */
    /* Kept from a step's first part for its last (ro__mj_step_part). */
    int warn_before[mjNWARNING];
    double x_before;
    bool last_frame;
    /* One block, freed with obs_low; act_sq and frc_sq hold the squares
     * that the costs sum, as Gymnasium's np.sum(np.square(...)) does. */
    float *obs_low, *obs_high, *act_low, *act_high, *act_sq;
    double *frc_sq;
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
     "walker2d_v5.xml",
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
    {"ant",
     "ant.xml",
     ANT | HEALTH | NORMAL_QVEL | FORWARD | EXCLUDE_X,
     {.frame_skip = 5,
      .forward_w = 1.0,
      .ctrl_w = 0.5,
      .contact_w = 5e-4,
      .healthy_w = 1.0,
      .noise = 0.1,
      .z_range = {0.2, 1.0},
      .contact_range = {-1.0, 1.0},
      .terminate_unhealthy = true,
      .exclude_x = true,
      .cfrc_obs = true,
      .main_body = "1"}},
};
enum { K_INVERTED_PENDULUM, K_HOPPER, K_HALF_CHEETAH, K_WALKER2D, K_ANT };

/* ---- the env ---- */

static int mj_create(const mj_kind_t *k, const char *const *keys, void **out,
                     const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                     size_t errlen)
{
    ro_mj_params_t p = k->defaults;
    int rc = ro__mj_parse_args(k->name, keys, args, nargs, &p, err, errlen);
    if (rc < 0)
        return rc;
    const mjModel *m;
    rc = ro__mj_model_acquire(k->file, &m, err, errlen);
    if (rc < 0)
        return rc;

    /* On cache lines of its own: instances of different workers' shards are
     * made one after the other, and each writes its own fields every step. */
    mj_env_t *e = ro__calloc_lines(1, sizeof *e);
    if (e == NULL)
        goto oom;
    e->kind = k;
    e->m = m;
    e->p = p;
    e->dt = m->opt.timestep * p.frame_skip;
    e->skip_x = (k->flags & EXCLUDE_X) && p.exclude_x ? ((k->flags & ANT) ? 2 : 1) : 0;
    e->obs_dim = (uint32_t)(m->nq - (int)e->skip_x + m->nv);
    if ((k->flags & ANT) && p.cfrc_obs) /* every body but the world: 6 forces each */
        e->obs_dim += (uint32_t)(6 * (m->nbody - 1));
    e->act_dim = (uint32_t)m->nu;
    if ((k->flags & ANT) &&
        (rc = ro__mj_find_body(k->name, m, p.main_body, &e->main_body, err, errlen)))
        goto fail;
    /* The doubles first, so they are aligned; then the floats. */
    const size_t nfrc = 6 * (size_t)m->nbody;
    e->frc_sq = malloc(nfrc * sizeof(double) +
                       (2 * (size_t)e->obs_dim + 3 * (size_t)e->act_dim) * sizeof(float));
    if (e->frc_sq == NULL)
        goto oom;
    e->obs_low = (float *)(e->frc_sq + nfrc);
    e->obs_high = e->obs_low + e->obs_dim;
    e->act_low = e->obs_high + e->obs_dim;
    e->act_high = e->act_low + e->act_dim;
    e->act_sq = e->act_high + e->act_dim;
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
    rc = ro__errorf(err, errlen, RO_ENOMEM, "env '%s': out of memory", k->name);
fail:
    if (e != NULL)
        free(e->frc_sq);
    free(e);
    ro__mj_model_release(m);
    return rc;
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

/* clip is np.clip: NaN stays NaN. */
static double clip(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void write_obs(const mj_env_t *e, float *obs)
{
    const mjData *d = e->d;
    const int nq = e->m->nq, nv = e->m->nv;
    const bool clip_qvel = e->kind->flags & CLIP_QVEL;
    size_t k = 0;
    for (int i = (int)e->skip_x; i < nq; i++)
        obs[k++] = (float)d->qpos[i];
    for (int i = 0; i < nv; i++) {
        double v = d->qvel[i];
        if (clip_qvel)
            v = clip(v, -QVEL_CLIP, QVEL_CLIP);
        obs[k++] = (float)v;
    }
    if ((e->kind->flags & ANT) && e->p.cfrc_obs) {
        const double lo = e->p.contact_range[0], hi = e->p.contact_range[1];
        for (int i = 6; i < 6 * e->m->nbody; i++) /* cfrc_ext[1:], clipped as np.clip */
            obs[k++] = (float)clip(d->cfrc_ext[i], lo, hi);
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

/* frame_call runs one frame of a step: one mj_step. After the last,
 * Gymnasium calls mj_rnePostConstraint: the contact forces (cfrc_ext) are
 * computed nowhere else. Only ant reads them. */
static void frame_call(void *arg)
{
    mj_env_t *e = arg;
    mj_step(e->m, e->d);
    if (e->last_frame && (e->kind->flags & ANT))
        mj_rnePostConstraint(e->m, e->d);
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
 * z = qpos[1], angle = qpos[2]; hopper also checks qpos[2:] and qvel), and
 * for ant. */
static bool is_healthy(const mj_env_t *e)
{
    const mjData *d = e->d;
    if (e->kind->flags & ANT) {
        /* Ant-v5: the whole state finite and z = qpos[2] in the closed range. */
        bool finite = true;
        for (int i = 0; i < e->m->nq; i++)
            finite = finite && isfinite(d->qpos[i]);
        for (int i = 0; i < e->m->nv; i++)
            finite = finite && isfinite(d->qvel[i]);
        return finite && e->p.z_range[0] <= d->qpos[2] && d->qpos[2] <= e->p.z_range[1];
    }
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

/* contact_cost: Ant-v5's weight x sum of the squared clipped cfrc_ext of
 * every body, the world's (always 0) included, summed as numpy does. */
static double contact_cost(const mj_env_t *e)
{
    const double lo = e->p.contact_range[0], hi = e->p.contact_range[1];
    const size_t n = 6 * (size_t)e->m->nbody;
    for (size_t i = 0; i < n; i++) {
        double f = clip(e->d->cfrc_ext[i], lo, hi);
        e->frc_sq[i] = f * f;
    }
    return e->p.contact_w * ro__np_sum(e->frc_sq, n);
}

/* ctrl_cost: Gymnasium's ctrl_cost_weight * np.sum(np.square(action)). The
 * action is float32 (the action space's dtype), so NumPy 2 computes the
 * squares, their sum and the product with the (Python float) weight in
 * float32. */
static float ctrl_cost(const mj_env_t *e, const float *action)
{
    for (uint32_t j = 0; j < e->act_dim; j++)
        e->act_sq[j] = action[j] * action[j];
    return (float)e->p.ctrl_w * ro__np_sum_f(e->act_sq, e->act_dim);
}

/* main_x: what dx is measured on. Ant-v5 measures it on main_body's frame
 * (xpos, which lags qpos by the last step's integration), the others on
 * qpos[0]. */
static double main_x(const mj_env_t *e)
{
    return (e->kind->flags & ANT) ? e->d->xpos[3 * e->main_body] : e->d->qpos[0];
}

/* ro__mj_step_part (envs/step_part.h): part 0 checks the action and sets ctrl,
 * then every part is one frame (mj_step) under a guard; the last reads the
 * outcome. A guard per frame fails the step at the frame MuJoCo failed in,
 * as one guard around every frame did. */
int ro__mj_step_part(void *env, uint32_t part, ro_action_t action, float *obs, ro_step_t *out)
{
    mj_env_t *e = env;
    if (part == 0) {
        if (e->d == NULL || e->must_reset)
            return e->d == NULL ? RO_ENOMEM : RO_EIO;
        /* The control cost is on the action as given; MuJoCo clamps ctrl
         * to ctrlrange for the physics. */
        for (uint32_t j = 0; j < e->act_dim; j++)
            if (!isfinite(action.box[j]))
                return RO_EINVAL;
        for (uint32_t j = 0; j < e->act_dim; j++)
            e->d->ctrl[j] = action.box[j];
        for (int w = 0; w < mjNWARNING; w++)
            e->warn_before[w] = e->d->warning[w].number;
        e->x_before = main_x(e);
    }
    const bool last = e->last_frame = part + 1 >= e->p.frame_skip;
    if (ro__mj_guard(frame_call, e) != 0) {
        e->errors++;
        e->must_reset = true;
        return RO_EIO;
    }
    if (!last)
        return 1;
    const mjModel *m = e->m;
    mjData *d = e->d;
    for (int w = 0; w < mjNWARNING; w++)
        if (d->warning[w].number > e->warn_before[w])
            e->warnings += (uint64_t)(d->warning[w].number - e->warn_before[w]);
    if (state_discarded(d, e->warn_before)) {
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
    ro_mj_terms_t *t = &e->terms;
    *t = (ro_mj_terms_t){.survive = reward};
    if (f & FORWARD) {
        t->x_velocity = (main_x(e) - e->x_before) / e->dt;
        t->forward = e->p.forward_w * t->x_velocity;
        if (f & HEALTH) {
            const bool healthy = is_healthy(e);
            t->survive = healthy ? e->p.healthy_w : 0.0;
            terminated = !healthy && e->p.terminate_unhealthy;
        }
        t->ctrl_cost = ctrl_cost(e, action.box);
        t->contact_cost = (f & ANT) ? contact_cost(e) : 0.0;
        /* Gymnasium's order: (forward + healthy) - (ctrl_cost + contact_cost). */
        reward = (t->forward + t->survive) - (t->ctrl_cost + t->contact_cost);
    }
    out->reward = (float)reward;
    out->terminated = terminated;
    out->truncated = 0;
    return 0;
}

/* mj_step_env: the step, its parts in order. */
static int mj_step_env(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    int rc;
    for (uint32_t part = 0; (rc = ro__mj_step_part(env, part, action, obs, out)) > 0; part++)
        continue;
    return rc;
}

static void mj_destroy(void *env)
{
    mj_env_t *e = env;
    if (e->d != NULL)
        mj_deleteData(e->d);
    ro__mj_model_release(e->m);
    free(e->frc_sq);
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

void ro__mj_env_terms(const void *env, ro_mj_terms_t *out)
{
    *out = ((const mj_env_t *)env)->terms;
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

/* ---- env state (rollout/env.h "Env state") ----
 *
 * A state: a fixed part, then MuJoCo's own state of spec STATE_SPEC
 * (mj_getState: time, qpos, qvel, act, history, plugin state, the user
 * inputs and the warm start, so that the next mj_step is the one the saved
 * instance would have taken, bit for bit), as float64, host order. Ant
 * measures its forward velocity from body 1's xpos, which lags qpos by a
 * step and is not in MuJoCo's state: it is saved too. An instance not yet
 * reset (no mjData) saves has_data 0 and zeros. */
#define STATE_SPEC mjSTATE_INTEGRATION

typedef struct mj_state_head {
    uint64_t has_data, must_reset;
    ro_rng_t rng;
    uint64_t warnings, errors;
    double xpos1; /* body 1's x (xpos[3]) */
} mj_state_head_t;

static size_t mj_state_size(void *env)
{
    mj_env_t *e = env;
    return sizeof(mj_state_head_t) + (size_t)mj_stateSize(e->m, STATE_SPEC) * sizeof(mjtNum);
}

static int mj_save_state(void *env, void *buf, size_t len)
{
    mj_env_t *e = env;
    if (len != mj_state_size(e))
        return RO_EINVAL;
    mj_state_head_t h = {.has_data = e->d != NULL,
                         .must_reset = e->must_reset,
                         .rng = e->rng,
                         .warnings = e->warnings,
                         .errors = e->errors,
                         .xpos1 = e->d != NULL && e->m->nbody > 1 ? e->d->xpos[3] : 0.0};
    memcpy(buf, &h, sizeof h);
    char *st = (char *)buf + sizeof h;
    if (e->d == NULL) {
        memset(st, 0, len - sizeof h);
        return 0;
    }
    /* Through an aligned copy: buf need not be aligned for mjtNums. */
    const int n = mj_stateSize(e->m, STATE_SPEC);
    mjtNum *all = malloc((size_t)n * sizeof(mjtNum) + 1);
    if (all == NULL)
        return RO_ENOMEM;
    mj_getState(e->m, e->d, all, STATE_SPEC);
    memcpy(st, all, (size_t)n * sizeof(mjtNum));
    free(all);
    return 0;
}

/* set_state_call is mj_setState under the guard: MuJoCo may raise an
 * error on a state it cannot take. */
typedef struct set_state_arg {
    mj_env_t *e;
    const mjtNum *st;
} set_state_arg_t;

static void set_state_call(void *arg)
{
    set_state_arg_t *a = arg;
    mj_setState(a->e->m, a->e->d, a->st, STATE_SPEC);
}

static int mj_load_state(void *env, const void *buf, size_t len)
{
    mj_env_t *e = env;
    if (len != mj_state_size(e))
        return RO_EINVAL;
    mj_state_head_t h;
    memcpy(&h, buf, sizeof h);
    if (h.has_data > 1 || h.must_reset > 1)
        return RO_EINVAL;
    const int n = mj_stateSize(e->m, STATE_SPEC);
    mjtNum *st = malloc((size_t)n * sizeof(mjtNum) + 1);
    if (st == NULL)
        return RO_ENOMEM;
    memcpy(st, (const char *)buf + sizeof h, (size_t)n * sizeof(mjtNum));
    /* The constraints' on/off flags become bytes: only 0 and 1 are states
     * (MuJoCo converts whatever double it is given). */
    const int eq_off = mj_stateSize(e->m, STATE_SPEC & (mjSTATE_EQ_ACTIVE - 1));
    int rc = 0;
    for (int i = 0; i < e->m->neq; i++)
        if (st[eq_off + i] != 0.0 && st[eq_off + i] != 1.0)
            rc = RO_EINVAL;
    if (rc == 0 && h.has_data && e->d == NULL)
        rc = make_data(e);
    if (rc == 0 && h.has_data) {
        set_state_arg_t a = {e, st};
        if (ro__mj_guard(set_state_call, &a) != 0) {
            e->errors++;
            rc = RO_EIO;
        } else if (e->m->nbody > 1) {
            e->d->xpos[3] = h.xpos1;
        }
    }
    free(st);
    if (rc)
        return rc;
    e->rng = h.rng;
    e->warnings = h.warnings;
    e->errors = h.errors;
    /* A state saved before the first reset: no data, as then (the next
     * step fails as it would have, and the runtime resets). */
    if (!h.has_data && e->d != NULL) {
        mj_deleteData(e->d);
        e->d = NULL;
    }
    e->must_reset = h.must_reset;
    return 0;
}

RO_ENV_STATE_OPS(mj);

#define MJ_VTABLE(id, kname, steps)                                                                \
    static int kname##_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,   \
                              char *err, size_t errlen)                                            \
    {                                                                                              \
        return mj_create(&kinds[id], ro__mj_keys_##kname, out, args, nargs, seed, err, errlen);    \
    }                                                                                              \
    const ro_env_vtable_t ro__env_##kname = {                                                      \
        .abi_version = RO_ENV_ABI_VERSION,                                                         \
        .name = #kname,                                                                            \
        .arg_keys = ro__mj_keys_##kname,                                                           \
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
MJ_VTABLE(K_ANT, ant, 1000);
