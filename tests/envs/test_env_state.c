/*
 * Env state (envs/env_state.c, rollout/env.h "Env state"): for every env
 * with state support, save a state mid-episode, step K random actions
 * (episode ends and resets included), load the state back (into the same
 * instance and into one made with another seed) and apply the same actions:
 * the transitions must be the same bit for bit. And the blob's header
 * checks: another env's state, other args, a cut or grown blob, a future
 * version, an env that refuses the bytes, an env without state support.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_state.h"
#include "envs/registry.h"
#include "ro_build_config.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "spaces/layout.h"

#define WARM 37 /* steps before the save */
#define K 600   /* steps after it: every env here ends episodes within them */
#define TRACE_MAX (64u << 20)

/* An instance of either ABI with buffers for one step's outputs. */
typedef struct drv {
    ro_env_kind_t kind;
    ro_env_arg_t args[RO_MAX_ENV_ARGS];
    size_t nargs;
    uint32_t max_steps;
    uint64_t params;
    ro_space_layout_t lay;
    void *env;
    uint64_t elapsed; /* steps of the current episode, as the runtime counts */
    uint8_t *tensor[RO_ENV_MAX_TENSORS];
    uint8_t *mask;
    ro_step_t st[RO_ENV_MAX_AGENTS];
} drv_t;

/* One step's actions, chosen once and replayed. */
typedef struct acts {
    int32_t disc[64];
    float box[64];
} acts_t;

/* A transcript: every step's outputs appended byte for byte. */
typedef struct trace {
    uint8_t *p;
    size_t len;
} trace_t;

static void put(trace_t *t, const void *p, size_t n)
{
    assert_true(t->len + n <= TRACE_MAX);
    memcpy(t->p + t->len, p, n);
    t->len += n;
}

static void drv_open(drv_t *d, const char *name, const ro_env_arg_t *args, size_t nargs)
{
    char err[512] = "";
    memset(d, 0, sizeof *d);
    if (ro__env_open(&d->kind, name, err, sizeof err))
        fail_msg("open %s: %s", name, err);
    assert_true(ro__env_kind_has_state(&d->kind));
    assert_int_equal(ro__env_kind_check_args(&d->kind, args, nargs, d->args, &d->nargs,
                                             &d->max_steps, err, sizeof err),
                     0);
    d->params = ro__env_params_hash(ro__env_kind_name(&d->kind), d->args, d->nargs, d->max_steps);
    if (ro__env_kind_layout(&d->kind, d->args, d->nargs, 1, &d->lay, err, sizeof err))
        fail_msg("layout %s: %s", name, err);
    assert_true(d->lay.ndisc <= 64 && d->lay.nbox <= 64 && d->lay.agents * d->lay.ndisc <= 64 &&
                d->lay.agents * d->lay.nbox <= 64);
    for (uint32_t i = 0; i < d->lay.ntensors; i++)
        d->tensor[i] = calloc(d->lay.agents, d->lay.t[i].row_bytes);
    d->mask = calloc(d->lay.agents, d->lay.mask_width + 1);
}

static void drv_create(drv_t *d, uint64_t seed)
{
    char err[512] = "";
    int rc = d->kind.vt ? d->kind.vt->create(&d->env, d->args, d->nargs, seed, err, sizeof err)
                        : d->kind.vt2->create(&d->env, d->args, d->nargs, seed, err, sizeof err);
    if (rc)
        fail_msg("create: %s", err);
}

static void drv_destroy(drv_t *d)
{
    if (d->kind.vt)
        d->kind.vt->destroy(d->env);
    else
        d->kind.vt2->destroy(d->env);
    d->env = NULL;
}

static void drv_close(drv_t *d)
{
    for (uint32_t i = 0; i < d->lay.ntensors; i++)
        free(d->tensor[i]);
    free(d->mask);
    ro__layout_free(&d->lay);
    ro__env_close(&d->kind);
}

/* record appends the outputs of the last reset or step to t. */
static void record(drv_t *d, trace_t *t, int stepped)
{
    for (uint32_t i = 0; i < d->lay.ntensors; i++)
        put(t, d->tensor[i], d->lay.agents * d->lay.t[i].row_bytes);
    put(t, d->mask, d->lay.agents * d->lay.mask_width);
    if (stepped)
        put(t, d->st, d->lay.agents * sizeof d->st[0]);
}

static void drv_reset(drv_t *d, trace_t *t)
{
    if (d->kind.vt) {
        d->kind.vt->reset(d->env, (float *)d->tensor[0]);
    } else {
        ro_obs_out_t o = {.tensors = (void *const *)d->tensor,
                          .mask = d->lay.mask_width ? d->mask : NULL};
        d->kind.vt2->reset(d->env, &o);
    }
    d->elapsed = 0;
    if (t)
        record(d, t, 0);
}

/* pick chooses random actions, allowed by the mask of the last output. */
static void pick(drv_t *d, ro_rng_t *r, acts_t *a)
{
    const ro_space_layout_t *l = &d->lay;
    for (uint32_t ag = 0; ag < l->agents; ag++) {
        for (uint32_t e = 0; e < l->ndisc; e++) {
            int32_t v;
            do
                v = (int32_t)(ro__rng_next(r) % l->disc_n[e]);
            while (l->mask_width && !d->mask[ag * l->mask_width + l->disc_mask[e] + (uint32_t)v]);
            a->disc[ag * l->ndisc + e] = v;
        }
        for (uint32_t e = 0; e < l->nbox; e++)
            a->box[ag * l->nbox + e] = (float)ro__rng_uniform(r, l->box_low[e], l->box_high[e]);
    }
}

/* drv_step applies a, then resets the env when its episode ended (by the
 * env or by the episode limit), as the runtime does. */
static void drv_step(drv_t *d, const acts_t *a, trace_t *t)
{
    int rc;
    if (d->kind.vt) {
        ro_action_t act;
        if (d->lay.ndisc)
            act.discrete = a->disc[0];
        else
            act.box = a->box;
        rc = d->kind.vt->step(d->env, act, (float *)d->tensor[0], &d->st[0]);
    } else {
        ro_obs_out_t o = {.tensors = (void *const *)d->tensor,
                          .mask = d->lay.mask_width ? d->mask : NULL};
        ro_actions_t act = {.discrete = d->lay.ndisc ? a->disc : NULL,
                            .box = d->lay.nbox ? a->box : NULL};
        rc = d->kind.vt2->step(d->env, &act, &o, d->st);
    }
    assert_int_equal(rc, 0);
    d->elapsed++;
    if (t)
        record(d, t, 1);
    int done = d->max_steps && d->elapsed >= d->max_steps;
    for (uint32_t ag = 0; ag < d->lay.agents; ag++)
        done |= d->st[ag].terminated || d->st[ag].truncated;
    if (done)
        drv_reset(d, t);
}

/* save writes the instance's state blob into a new buffer. */
static uint8_t *save(drv_t *d, size_t *len)
{
    char err[256] = "";
    size_t n;
    assert_int_equal(ro__env_state_bytes(&d->kind, d->env, &n, err, sizeof err), 0);
    uint8_t *blob = malloc(n);
    assert_int_equal(
        ro__env_state_save(&d->kind, d->env, d->params, d->elapsed, blob, n, len, err, sizeof err),
        0);
    assert_int_equal(*len, n);
    return blob;
}

static void load(drv_t *d, const uint8_t *blob, size_t len)
{
    char err[256] = "";
    uint64_t elapsed = UINT64_MAX;
    int rc = ro__env_state_load(&d->kind, d->env, d->params, blob, len, &elapsed, err, sizeof err);
    if (rc)
        fail_msg("load: %s", err);
    d->elapsed = elapsed;
}

/* run steps the K actions, recording every output into a fresh trace. */
static void run(drv_t *d, const acts_t *a, trace_t *t)
{
    t->len = 0;
    for (int i = 0; i < K; i++)
        drv_step(d, &a[i], t);
}

static void check_env(const char *name, const ro_env_arg_t *args, size_t nargs)
{
    drv_t d;
    drv_open(&d, name, args, nargs);
    ro_rng_t r;
    ro__rng_init(&r, 42);
    acts_t *a = calloc(K, sizeof *a);
    trace_t t1 = {.p = malloc(TRACE_MAX)}, t2 = {.p = malloc(TRACE_MAX)};

    drv_create(&d, 7);
    drv_reset(&d, NULL);
    for (int i = 0; i < WARM; i++) {
        pick(&d, &r, &a[0]);
        drv_step(&d, &a[0], NULL);
    }
    size_t len;
    uint8_t *blob = save(&d, &len);
    uint64_t elapsed0 = d.elapsed;
    uint8_t *mask0 = malloc(d.lay.agents * d.lay.mask_width + 1);
    memcpy(mask0, d.mask, d.lay.agents * d.lay.mask_width);
    /* The actions are chosen on the first run (each from the mask the
     * step before left), then applied as they are. */
    t1.len = 0;
    for (int i = 0; i < K; i++) {
        pick(&d, &r, &a[i]);
        drv_step(&d, &a[i], &t1);
    }
    assert_true(t1.len > 0);

    /* The same instance, loaded back. */
    load(&d, blob, len);
    assert_int_equal(d.elapsed, elapsed0);
    memcpy(d.mask, mask0, d.lay.agents * d.lay.mask_width);
    run(&d, a, &t2);
    assert_int_equal(t2.len, t1.len);
    assert_memory_equal(t1.p, t2.p, t1.len);
    drv_destroy(&d);

    /* Another instance, made with another seed and moved on: the state
     * decides everything, its RNG included. */
    drv_create(&d, 99);
    drv_reset(&d, NULL);
    acts_t scratch;
    for (int i = 0; i < 5; i++) {
        pick(&d, &r, &scratch);
        drv_step(&d, &scratch, NULL);
    }
    load(&d, blob, len);
    memcpy(d.mask, mask0, d.lay.agents * d.lay.mask_width);
    run(&d, a, &t2);
    assert_int_equal(t2.len, t1.len);
    assert_memory_equal(t1.p, t2.p, t1.len);

    /* A fresh instance's state (before any reset) saves and loads too. */
    drv_destroy(&d);
    drv_create(&d, 5);
    size_t flen;
    uint8_t *fresh = save(&d, &flen);
    load(&d, fresh, flen);
    free(fresh);
    drv_destroy(&d);

    free(mask0);
    free(blob);
    free(t1.p);
    free(t2.p);
    free(a);
    drv_close(&d);
}

static void test_cartpole(void **state)
{
    (void)state;
    check_env("cartpole", NULL, 0);
}

static void test_pendulum(void **state)
{
    (void)state;
    const ro_env_arg_t args[] = {{"g", "9.81"}, {"max_episode_steps", "50"}};
    check_env("pendulum", args, 2);
}

static void test_burn(void **state)
{
    (void)state;
    const ro_env_arg_t args[] = {
        {"cost_us", "0"}, {"obs_dim", "7"}, {"act_n", "3"}, {"max_episode_steps", "100"}};
    check_env("burn", args, 4);
}

static void test_mountaincar(void **state)
{
    (void)state;
    check_env(RO_PLUGIN_PATH, NULL, 0);
}

static void test_gridworld(void **state)
{
    (void)state;
    check_env(RO_GRIDWORLD_PATH, NULL, 0);
}

static void test_catch(void **state)
{
    (void)state;
    const ro_env_arg_t args[] = {{"action", "multidiscrete"}};
    check_env(RO_CATCH_PATH, args, 1);
}

#if RO_HAVE_MUJOCO
/* The MuJoCo envs: MuJoCo's full integration state (warm start included),
 * the env's RNG and counters. */
static void test_mujoco(void **state)
{
    (void)state;
    const char *names[] = {"inverted_pendulum", "hopper", "half_cheetah", "walker2d", "ant"};
    const ro_env_arg_t limit[] = {{"max_episode_steps", "150"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        check_env(names[i], limit, 1);
}
#endif

/* The params hash: the same for args in another order, different for
 * other values, another limit or another env. */
static void test_params_hash(void **state)
{
    (void)state;
    const ro_env_arg_t a[] = {{"obs_dim", "7"}, {"act_n", "3"}};
    const ro_env_arg_t b[] = {{"act_n", "3"}, {"obs_dim", "7"}};
    const ro_env_arg_t c[] = {{"act_n", "3"}, {"obs_dim", "8"}};
    uint64_t h = ro__env_params_hash("burn", a, 2, 1000);
    assert_true(h == ro__env_params_hash("burn", b, 2, 1000));
    assert_true(h != ro__env_params_hash("burn", c, 2, 1000));
    assert_true(h != ro__env_params_hash("burn", a, 2, 999));
    assert_true(h != ro__env_params_hash("burns", a, 2, 1000));
    assert_true(h != ro__env_params_hash("burn", a, 1, 1000));
}

/* expect_refused loads blob and wants RO_EBADMSG with `want` in the
 * message, the instance untouched. */
static void expect_refused(drv_t *d, const uint8_t *blob, size_t len, uint64_t params,
                           const char *want)
{
    char err[256] = "";
    int rc = ro__env_state_load(&d->kind, d->env, params, blob, len, NULL, err, sizeof err);
    assert_int_equal(rc, RO_EBADMSG);
    if (strstr(err, want) == NULL)
        fail_msg("'%s' does not say '%s'", err, want);
}

static void test_header_checks(void **state)
{
    (void)state;
    const ro_env_arg_t args[] = {{"cost_us", "0"}, {"obs_dim", "4"}};
    drv_t d, other;
    drv_open(&d, "burn", args, 2);
    drv_create(&d, 3);
    drv_reset(&d, NULL);
    size_t len;
    uint8_t *blob = save(&d, &len);
    uint8_t *bad = malloc(len + 16);

    /* Another env's state. */
    drv_open(&other, "cartpole", NULL, 0);
    drv_create(&other, 3);
    size_t olen;
    uint8_t *oblob = save(&other, &olen);
    expect_refused(&d, oblob, olen, d.params, "env state of env 'cartpole', not of env 'burn'");
    /* Other args (another params hash). */
    expect_refused(&d, blob, len, d.params ^ 1, "made with other args");
    /* Cut short, grown, cut inside the header. */
    expect_refused(&d, blob, len - 1, d.params, "its header says");
    memcpy(bad, blob, len);
    memset(bad + len, 0, 16);
    expect_refused(&d, bad, len + 16, d.params, "its header says");
    expect_refused(&d, blob, RO_ENV_STATE_HEADER - 1, d.params, "too short");
    /* Wrong magic, a future version, a name without its NUL. */
    memcpy(bad, blob, len);
    bad[0] = 'X';
    expect_refused(&d, bad, len, d.params, "wrong magic");
    memcpy(bad, blob, len);
    bad[4] = 2;
    expect_refused(&d, bad, len, d.params, "version 2; this build reads version 1");
    memcpy(bad, blob, len);
    memset(bad + 8, 'a', RO_ENV_STATE_NAME);
    expect_refused(&d, bad, len, d.params, "not NUL-terminated");
    /* A size that agrees with the blob but not with this instance (another
     * obs_dim would also change the params; here only the size lies). */
    memcpy(bad, blob, len);
    bad[88] = (uint8_t)(bad[88] - 4);
    expect_refused(&d, bad, len - 4, d.params, "this instance's state takes");
    /* Every header check passes, the env refuses its bytes: burn's z NaN. */
    memcpy(bad, blob, len);
    memset(bad + RO_ENV_STATE_HEADER + sizeof(ro_rng_t), 0xff, sizeof(double));
    char err[256] = "";
    assert_int_equal(ro__env_state_load(&d.kind, d.env, d.params, bad, len, NULL, err, sizeof err),
                     RO_EINVAL);
    assert_string_equal(err, "env 'burn' refused the state's bytes (load_state() returned -22)");

    free(oblob);
    free(bad);
    free(blob);
    drv_destroy(&other);
    drv_close(&other);
    drv_destroy(&d);
    drv_close(&d);
}

/* An env without state support is refused by name, and peek reads a
 * header without any env. */
static void test_no_state(void **state)
{
    (void)state;
    ro_env_kind_t k = {.vt = &ro__env_cartpole}; /* no state functions */
    char err[256] = "";
    size_t n;
    assert_int_equal(ro__env_state_bytes(&k, NULL, &n, err, sizeof err), RO_ENOTSUP);
    assert_string_equal(err, "env 'cartpole' has no state support (it gives no save_state()/"
                             "load_state(): docs/env-api.md \"Env state\")");
    uint8_t blob[RO_ENV_STATE_HEADER] = "ROES\1";
    strcpy((char *)blob + 8, "cartpole");
    assert_int_equal(ro__env_state_load(&k, NULL, 0, blob, sizeof blob, NULL, err, sizeof err),
                     RO_ENOTSUP);
    ro_env_state_info_t info;
    assert_int_equal(ro__env_state_peek(blob, sizeof blob, &info, err, sizeof err), 0);
    assert_string_equal(info.name, "cartpole");
    assert_int_equal(info.size, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cartpole),
        cmocka_unit_test(test_pendulum),
        cmocka_unit_test(test_burn),
        cmocka_unit_test(test_mountaincar),
        cmocka_unit_test(test_gridworld),
        cmocka_unit_test(test_catch),
        cmocka_unit_test(test_params_hash),
        cmocka_unit_test(test_header_checks),
        cmocka_unit_test(test_no_state),
#if RO_HAVE_MUJOCO
        cmocka_unit_test(test_mujoco),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
