/*
 * Stream mode's segments (actors/stream/segment.c, and runtime/grant_pool.c
 * through it; the layout of the columns is test_segment_layout.c's): a
 * shard's stream port filling segments over many steps from a fake step
 * batch (step_batch_fixture.h: every value a known function of env and
 * step), every column checked row by row; the hand-over of full segments
 * to a hub (a loop actor here), a partial last one and an empty last one
 * (a shard that ends at a segment boundary still tells the hub it is
 * done); an empty pool making the shard wait, counted, and the grant
 * (RO_MSG_STREAM_RESUME) that lets it go on. Last, a shard on its own
 * thread against a hub on the test's loop (for TSan: the pool and the
 * messages order the segments' bytes). Waits are for messages, with one
 * hang guard (loop_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exchange/messages.h"
#include "actors/stream/segment.h"
#include "actors/stream/stream_port.h"
#include "loop_fixture.h"
#include "runtime/alloc.h"
#include "step_batch_fixture.h"

#define MAX_N 4
#define MAX_GOT 32

/* ---- the known function of (env, step) that the learner "answered" ---- */

static int32_t act_of(uint32_t e, uint64_t k)
{
    return (int32_t)((e * 3 + k) % 5);
}

static float actf_of(uint32_t e, uint64_t k, uint32_t a)
{
    return (float)e + 0.5f * (float)k + 0.125f * (float)a;
}

static float logp_of(uint32_t e, uint64_t k)
{
    return -((float)e + 0.25f * (float)k);
}

static float mean_of(uint32_t e, uint64_t k, uint32_t a)
{
    return 2.0f * (float)e + (float)k + 0.5f * (float)a;
}

static float log_std_of(uint64_t k, uint32_t a)
{
    return -0.5f - 0.25f * (float)a - 0.125f * (float)k;
}

/* Over 2^32 every other step: the column keeps the low 32 bits. */
static uint64_t ep_num_of(uint32_t e, uint64_t k)
{
    return ((uint64_t)(k % 2) << 32) + (uint64_t)e * 1000 + k;
}

static uint32_t ep_len_of(uint32_t e, uint64_t k)
{
    return (uint32_t)(2 * k + e);
}

/* The version that answered step k: 40, 43, 42, 41, 40, 43, ... It changes
 * within a segment, and neither the first row's nor any fixed row's is
 * always a segment's min or max: both are the rows' own. */
static uint64_t version_of(uint64_t k)
{
    return 40 + (k * 3) % 4;
}

/* fake_batch_fill's flags after k steps (the outcome of step k - 1). */
static bool ended(uint32_t e, uint64_t k)
{
    return (e + k) % 3 == 1 || (e + k) % 5 == 2;
}

static void expect_f(float got, float want, const char *what, uint64_t k, uint32_t e)
{
    if (got != want)
        fail_msg("%s of env %u at step %llu: %g, expected %g", what, e, (unsigned long long)k,
                 (double)got, (double)want);
}

/* ---- a shard stepped by the test, as its env actor would ---- */

typedef struct shard_sim {
    ro_step_batch_t b;
    float logp[MAX_N], mean[MAX_N * 4], log_std[4];
    uint64_t ep_num[MAX_N];
    uint32_t ep_len[MAX_N];
    uint64_t k; /* steps taken */
} shard_sim_t;

static void sim_init(shard_sim_t *sim, const ro_seg_layout_t *lay, uint32_t shard, uint32_t first,
                     uint32_t n)
{
    assert_true(n <= MAX_N && lay->act_dim <= 4);
    memset(sim, 0, sizeof *sim);
    fake_batch_init(&sim->b, shard, first, n, lay->obs_dim, lay->act_dim, lay->discrete);
    sim->b.logp = sim->logp;
    sim->b.mean = sim->mean;
    sim->b.log_std = sim->log_std;
}

/* The learner's answer for step k, then the env actor's capture of it. */
static void sim_act(shard_sim_t *sim, ro_stream_port_t *p)
{
    ro_step_batch_t *b = &sim->b;
    const uint64_t k = sim->k;
    for (uint32_t j = 0; j < b->n; j++) {
        const uint32_t e = b->first + j;
        b->act_i[j] = act_of(e, k);
        for (uint32_t a = 0; a < b->act_dim; a++) {
            b->act_f[j * b->act_dim + a] = actf_of(e, k, a);
            sim->mean[j * b->act_dim + a] = mean_of(e, k, a);
        }
        sim->logp[j] = logp_of(e, k);
        sim->ep_num[j] = ep_num_of(e, k);
        sim->ep_len[j] = ep_len_of(e, k);
    }
    for (uint32_t a = 0; a < b->act_dim; a++)
        sim->log_std[a] = log_std_of(k, a);
    b->policy_version = version_of(k);
    ro__stream_capture_action(p, b, sim->ep_num, sim->ep_len);
}

/* One whole step: capture, step (the fixture's outcome of step k), capture
 * the outcome. Returns as ro__stream_capture_outcome. */
static bool sim_step(shard_sim_t *sim, ro_stream_port_t *p)
{
    sim_act(sim, p);
    fake_batch_fill(&sim->b, ++sim->k);
    return ro__stream_capture_outcome(p, &sim->b);
}

/*
 * check_segment wants s to hold `rows` rows from step k0 of the shard's
 * envs, every column as the known functions say, its final observations
 * those of the steps that ended an episode, and next_obs the observation
 * after step k0 + rows.
 */
static void check_segment(const ro_segment_t *s, const shard_sim_t *sim, uint32_t shard,
                          uint64_t shard_seq, uint64_t k0, uint32_t rows, bool last)
{
    const ro_seg_layout_t *lay = s->lay;
    const uint32_t n = sim->b.n, first = sim->b.first, od = lay->obs_dim, ad = lay->act_dim;
    assert_int_equal(s->shard, shard);
    assert_int_equal(s->shard_seq, shard_seq);
    assert_int_equal(s->first_env, first);
    assert_int_equal(s->n, n);
    assert_int_equal(s->t, rows);
    assert_int_equal(s->last, last);
    const float *obs = s->col[RO_SEG_OBS], *logp = s->col[RO_SEG_LOGP];
    const float *reward = s->col[RO_SEG_REWARD], *fobs = s->col[RO_SEG_FINAL_OBS];
    const uint8_t *term = s->col[RO_SEG_TERMINATED], *trunc = s->col[RO_SEG_TRUNCATED];
    const uint8_t *first_col = s->col[RO_SEG_IS_FIRST];
    const uint32_t *ep = s->col[RO_SEG_EPISODE], *st = s->col[RO_SEG_STEP];
    const uint64_t *pv = s->col[RO_SEG_POLICY_VERSION];
    const int32_t *fidx = s->col[RO_SEG_FINAL_INDEX];
    uint32_t nfinal = 0;
    uint64_t vmin = UINT64_MAX, vmax = 0;
    for (uint32_t t = 0; t < rows; t++) {
        const uint64_t k = k0 + t;
        assert_int_equal(pv[t], version_of(k));
        vmin = pv[t] < vmin ? pv[t] : vmin;
        vmax = pv[t] > vmax ? pv[t] : vmax;
        for (uint32_t j = 0; j < n; j++) {
            const uint32_t e = first + j;
            const size_t cell = (size_t)t * n + j;
            for (uint32_t q = 0; q < od; q++)
                expect_f(obs[cell * od + q], fake_obs(e, k, q), "obs", k, e);
            if (lay->discrete)
                assert_int_equal(((const int32_t *)s->col[RO_SEG_ACTION])[cell], act_of(e, k));
            for (uint32_t a = 0; !lay->discrete && a < ad; a++)
                expect_f(((const float *)s->col[RO_SEG_ACTION])[cell * ad + a], actf_of(e, k, a),
                         "action", k, e);
            for (uint32_t a = 0; lay->gaussian && a < ad; a++)
                expect_f(((const float *)s->col[RO_SEG_MEAN])[cell * ad + a], mean_of(e, k, a),
                         "mean", k, e);
            expect_f(logp[cell], logp_of(e, k), "logp", k, e);
            assert_int_equal(first_col[cell], k == 0 || ended(e, k));
            assert_int_equal(ep[cell], (uint32_t)ep_num_of(e, k));
            assert_int_equal(st[cell], ep_len_of(e, k));
            /* The outcome of step k: the batch after k + 1 steps. */
            expect_f(reward[cell], (float)e + 0.25f * (float)(k + 1), "reward", k, e);
            assert_int_equal(term[cell], (e + k + 1) % 3 == 1);
            assert_int_equal(trunc[cell], (e + k + 1) % 5 == 2);
            if (!ended(e, k + 1))
                continue;
            assert_true(nfinal < s->nfinal);
            assert_int_equal(fidx[nfinal], (int32_t)cell);
            for (uint32_t q = 0; q < od; q++)
                expect_f(fobs[(size_t)nfinal * od + q], -fake_obs(e, k + 1, q), "final_obs", k, e);
            nfinal++;
        }
        for (uint32_t a = 0; lay->gaussian && a < ad; a++)
            expect_f(((const float *)s->col[RO_SEG_LOG_STD])[(size_t)t * ad + a], log_std_of(k, a),
                     "log_std", k, 0);
    }
    assert_int_equal(s->nfinal, nfinal);
    if (rows) {
        assert_int_equal(s->version_min, vmin);
        assert_int_equal(s->version_max, vmax);
    }
    const float *next = s->col[RO_SEG_NEXT_OBS];
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t q = 0; q < od; q++)
            expect_f(next[(size_t)j * od + q], fake_obs(first + j, k0 + rows, q), "next_obs",
                     k0 + rows, first + j);
}

/* ---- spaces ---- */

static ro_space_t box(uint32_t ndim, uint32_t d0, uint32_t d1)
{
    ro_space_t s = {.kind = RO_SPACE_BOX, .ndim = ndim};
    s.shape[0] = d0;
    s.shape[1] = d1;
    return s;
}

static ro_space_t discrete(uint32_t n)
{
    return (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = n};
}

/* ---- a port, a hub and an env actor on the test's loop ---- */

typedef struct fx {
    uv_loop_t loop;
    ro_actor_t hub, env;
    ro_loop_home_t hub_home, env_home;
    ro_segment_t *got[MAX_GOT]; /* handed to the hub, in order */
    uint32_t ngot, want;
    uint32_t resumed; /* RO_MSG_STREAM_RESUME handled */
    ro_seg_layout_t lay;
    ro_seg_pool_t pool;
    ro_stream_port_t port;
    shard_sim_t sim;
} fx_t;

static void hub_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    fx_t *f = ro__container_of(self, fx_t, hub);
    assert_int_equal(msg->type, RO_MSG_SEGMENT);
    assert_true(f->ngot < MAX_GOT);
    f->got[f->ngot++] = ro__container_of(msg, ro_segment_t, msg);
}

/* The env actor's part: a segment is granted; take it. */
static void env_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    fx_t *f = ro__container_of(self, fx_t, env);
    assert_int_equal(msg->type, RO_MSG_STREAM_RESUME);
    assert_ptr_equal(msg, &f->port.resume_msg);
    ro__stream_port_resume(&f->port);
    f->resumed++;
}

static bool got_wanted(void *ctx)
{
    fx_t *f = ctx;
    return f->ngot >= f->want;
}

/* wait_segments runs the loop until the hub has `want` segments in all. */
static void wait_segments(fx_t *f, uint32_t want)
{
    f->want = want;
    loop_wait(&f->loop, got_wanted, f, "the hub's RO_MSG_SEGMENT");
    assert_int_equal(f->ngot, want);
}

static bool got_resume(void *ctx)
{
    fx_t *f = ctx;
    return f->resumed > 0;
}

static fx_t *fx_new(uint32_t T, const ro_space_t *obs, const ro_space_t *act, bool gaussian,
                    uint32_t nsegs, uint32_t shard, uint32_t first, uint32_t n)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(ro__actor_init_loop(&f->hub, "hub", hub_behaviour, &f->loop, &f->hub_home), 0);
    assert_int_equal(ro__actor_init_loop(&f->env, "env", env_behaviour, &f->loop, &f->env_home), 0);
    ro__seg_layout(&f->lay, T, obs, act, gaussian, MAX_N);
    assert_int_equal(ro__seg_pool_init(&f->pool, &f->lay, nsegs, false), 0);
    ro__stream_port_init(&f->port, &f->pool, &f->hub, shard, &f->env);
    sim_init(&f->sim, &f->lay, shard, first, n);
    return f;
}

static void fx_free(fx_t *f)
{
    ro__actor_close_loop(&f->hub_home);
    ro__actor_close_loop(&f->env_home);
    loop_finish(&f->loop);
    ro__seg_pool_free(&f->pool);
    fake_batch_free(&f->sim.b);
    free(f);
}

static void pool_counts(fx_t *f, uint32_t want_free, uint32_t want_waiting)
{
    uint32_t nfree, nwaiting;
    ro__grant_pool_counts(&f->pool.pool, &nfree, &nwaiting);
    assert_int_equal(nfree, want_free);
    assert_int_equal(nwaiting, want_waiting);
}

/* T steps fill a segment, which goes to the hub with every column as the
 * learner answered and the envs did; the next one is taken at once. */
static void fill_and_hand_over(const ro_space_t *obs, const ro_space_t *act, bool gaussian)
{
    const uint32_t T = 5;
    fx_t *f = fx_new(T, obs, act, gaussian, 3, 2, 5, 3);
    assert_true(ro__stream_port_ready(&f->port));
    ro_segment_t *first = f->port.cur;
    assert_true(ro__stream_port_ready(&f->port)); /* has one: takes no other */
    assert_ptr_equal(f->port.cur, first);
    pool_counts(f, 2, 0);
    for (uint32_t t = 0; t < T - 1; t++) {
        assert_true(sim_step(&f->sim, &f->port));
        assert_int_equal(f->port.cur->t, t + 1);
    }
    assert_int_equal(f->ngot, 0);
    assert_true(sim_step(&f->sim, &f->port)); /* the T-th row: handed over */
    assert_ptr_not_equal(f->port.cur, first);
    assert_int_equal(f->port.cur->shard_seq, 1);
    assert_int_equal(f->port.cur->t, 0);
    wait_segments(f, 1);
    assert_ptr_equal(f->got[0], first);
    check_segment(first, &f->sim, 2, 0, 0, T, false);
    assert_true(first->nfinal > 0); /* the fixture ends episodes often */

    /* A second segment, from step T on. */
    for (uint32_t t = 0; t < T; t++)
        assert_true(sim_step(&f->sim, &f->port));
    wait_segments(f, 2);
    check_segment(f->got[1], &f->sim, 2, 1, T, T, false);
    assert_int_equal(f->port.cur->shard_seq, 2);
    pool_counts(f, 0, 0);
    assert_int_equal(atomic_load(&f->port.waits), 0);
    fx_free(f);
}

static void test_fill_discrete(void **state)
{
    (void)state;
    ro_space_t obs = box(1, 3, 0), act = discrete(5);
    fill_and_hand_over(&obs, &act, false);
}

static void test_fill_box_gaussian(void **state)
{
    (void)state;
    ro_space_t obs = box(2, 2, 2), act = box(1, 3, 0);
    fill_and_hand_over(&obs, &act, true);
}

static void test_fill_box(void **state)
{
    (void)state;
    ro_space_t obs = box(1, 2, 0), act = box(1, 2, 0);
    fill_and_hand_over(&obs, &act, false);
}

/* The run ends mid-segment: the rows so far go as the shard's last, with
 * the observation after them; finishing again does nothing. */
static void test_finish_partial(void **state)
{
    (void)state;
    ro_space_t obs = box(1, 3, 0), act = discrete(4);
    fx_t *f = fx_new(4, &obs, &act, false, 2, 0, 0, 2);
    assert_true(ro__stream_port_ready(&f->port));
    for (int i = 0; i < 4 + 2; i++) /* one full segment, then 2 rows */
        assert_true(sim_step(&f->sim, &f->port));
    ro_segment_t *partial = f->port.cur;
    ro__stream_port_finish(&f->port, &f->sim.b);
    assert_null(f->port.cur);
    wait_segments(f, 2);
    check_segment(f->got[0], &f->sim, 0, 0, 0, 4, false);
    assert_ptr_equal(f->got[1], partial);
    check_segment(partial, &f->sim, 0, 1, 4, 2, true);
    /* Nothing being filled: nothing more goes (a shard ends once). */
    ro__stream_port_finish(&f->port, &f->sim.b);
    assert_null(f->port.cur);
    pool_counts(f, 0, 0);
    fx_free(f);
}

/* A shard that ends exactly at a segment boundary hands over an empty
 * segment as its last, with its envs and version set: the hub needs it to
 * count the shard done. */
static void test_finish_empty(void **state)
{
    (void)state;
    ro_space_t obs = box(1, 2, 0), act = discrete(2);
    fx_t *f = fx_new(3, &obs, &act, false, 2, 1, 2, 2);
    assert_true(ro__stream_port_ready(&f->port));
    for (int i = 0; i < 3; i++)
        assert_true(sim_step(&f->sim, &f->port));
    wait_segments(f, 1);
    check_segment(f->got[0], &f->sim, 1, 0, 0, 3, false);
    ro_segment_t *empty = f->port.cur;
    assert_non_null(empty);
    assert_int_equal(empty->t, 0);
    f->sim.b.policy_version = 77; /* as the last answer left it */
    ro__stream_port_finish(&f->port, &f->sim.b);
    wait_segments(f, 2);
    assert_ptr_equal(f->got[1], empty);
    check_segment(empty, &f->sim, 1, 1, 3, 0, true);
    assert_int_equal(empty->version_min, 77);
    assert_int_equal(empty->version_max, 77);
    for (int c = 0; c < RO_SEG_NCOLS; c++)
        assert_int_equal(ro__seg_col_bytes(empty, c), c == RO_SEG_NEXT_OBS ? 2 * 2 * 4 : 0);
    fx_free(f);
}

/*
 * The pool empties (the hub holds every segment): the shard must wait, and
 * the wait is counted. A segment given back goes to the waiting shard
 * (RO_MSG_STREAM_RESUME), which starts it; the next one given back, with
 * no one waiting, is free again.
 */
static void test_wait_and_grant(void **state)
{
    (void)state;
    ro_space_t obs = box(1, 2, 0), act = discrete(3);
    const uint32_t T = 2;
    fx_t *f = fx_new(T, &obs, &act, false, 2, 3, 1, 3);
    assert_true(ro__stream_port_ready(&f->port));
    for (uint32_t i = 0; i < 2 * T - 1; i++)
        assert_true(sim_step(&f->sim, &f->port));
    assert_false(sim_step(&f->sim, &f->port)); /* the second handed over, none left */
    assert_null(f->port.cur);
    assert_int_equal(atomic_load(&f->port.waits), 1);
    pool_counts(f, 0, 1);
    wait_segments(f, 2);
    check_segment(f->got[0], &f->sim, 3, 0, 0, T, false);
    check_segment(f->got[1], &f->sim, 3, 1, T, T, false);
    assert_int_equal(f->resumed, 0);

    /* The hub is done with the first: it goes to the waiting shard. */
    ro_segment_t *a = f->got[0], *b = f->got[1];
    a->next = NULL;
    ro__seg_pool_give(&f->pool, a);
    pool_counts(f, 0, 0);
    loop_wait(&f->loop, got_resume, f, "RO_MSG_STREAM_RESUME to the waiting shard");
    assert_int_equal(f->resumed, 1);
    assert_ptr_equal(f->port.cur, a);
    assert_int_equal(a->shard_seq, 2);
    assert_int_equal(a->t, 0);
    assert_int_equal(a->nfinal, 0);
    assert_false(a->last);
    assert_int_equal(atomic_load(&f->port.waits), 1);

    /* No one waits for the second: it is free. */
    b->next = NULL;
    ro__seg_pool_give(&f->pool, b);
    pool_counts(f, 1, 0);
    for (uint32_t i = 0; i < T; i++)
        assert_true(sim_step(&f->sim, &f->port));
    wait_segments(f, 3);
    assert_ptr_equal(f->got[2], a);
    check_segment(a, &f->sim, 3, 2, 2 * T, T, false);
    assert_ptr_equal(f->port.cur, b);
    assert_int_equal(b->shard_seq, 3);
    assert_int_equal(atomic_load(&f->port.waits), 1);
    fx_free(f);
}

/* ---- a shard on its own thread, the hub on the test's ---- */

#define THREAD_T 4
#define THREAD_STEPS 40 /* 10 full segments, then an empty last one */

typedef struct threaded {
    uv_loop_t hub_loop, env_loop;
    ro_actor_t hub, env;
    ro_loop_home_t hub_home, env_home;
    ro_seg_pool_t pool;
    ro_stream_port_t port;
    shard_sim_t sim;        /* the env thread's */
    uint32_t got, resumed;  /* the hub's; the env's */
    bool last_seen, failed; /* the hub's */
} threaded_t;

/* The env thread: steps until it must wait or is done. */
static void env_run(threaded_t *x)
{
    while (x->sim.k < THREAD_STEPS)
        if (!sim_step(&x->sim, &x->port))
            return; /* RO_MSG_STREAM_RESUME comes later */
    ro__stream_port_finish(&x->port, &x->sim.b);
    uv_stop(&x->env_loop);
}

static void threaded_env_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    threaded_t *x = ro__container_of(self, threaded_t, env);
    if (msg->type == RO_MSG_STREAM_RESUME) {
        ro__stream_port_resume(&x->port);
        x->resumed++;
    } else if (!ro__stream_port_ready(&x->port)) {
        return;
    }
    env_run(x);
}

/* The hub checks each segment (in order, every obs row) and gives it back
 * at once: a shard that waits is woken from this thread. */
static void threaded_hub_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    threaded_t *x = ro__container_of(self, threaded_t, hub);
    ro_segment_t *s = ro__container_of(msg, ro_segment_t, msg);
    const uint32_t n = s->n, od = s->lay->obs_dim;
    const float *obs = s->col[RO_SEG_OBS];
    if (s->shard_seq != x->got || s->first_env != 1 || n != 2 || x->last_seen)
        x->failed = true;
    for (uint32_t t = 0; t < s->t; t++)
        for (uint32_t j = 0; j < n; j++)
            if (obs[((size_t)t * n + j) * od] != fake_obs(1 + j, s->shard_seq * THREAD_T + t, 0))
                x->failed = true;
    x->last_seen = s->last;
    if (s->last && (s->t != 0 || s->shard_seq != THREAD_STEPS / THREAD_T))
        x->failed = true;
    x->got++;
    s->next = NULL;
    ro__seg_pool_give(s->pool, s);
}

/* The env thread makes its actor's home itself: a loop actor's home
 * belongs to the thread that runs its loop (runtime/actor.h), which tells
 * sends from that thread from sends from others. */
static void *env_thread(void *arg)
{
    threaded_t *x = arg;
    if (ro__actor_init_loop(&x->env, "env", threaded_env_behaviour, &x->env_loop, &x->env_home) !=
        0)
        return NULL; /* the hub never sees a segment: the hang guard says so */
    ro_msg_t start = {.type = RO_MSG_START};
    ro__actor_send(&x->env, &start);
    uv_run(&x->env_loop, UV_RUN_DEFAULT); /* until env_run's uv_stop */
    return NULL;
}

static void test_threaded_shard(void **state)
{
    (void)state;
    threaded_t *x = calloc(1, sizeof *x);
    assert_non_null(x);
    ro_space_t obs = box(1, 3, 0), act = discrete(2);
    ro_seg_layout_t lay;
    ro__seg_layout(&lay, THREAD_T, &obs, &act, false, 2);
    assert_int_equal(ro__seg_pool_init(&x->pool, &lay, 2, false), 0);
    assert_int_equal(uv_loop_init(&x->hub_loop), 0);
    assert_int_equal(uv_loop_init(&x->env_loop), 0);
    assert_int_equal(
        ro__actor_init_loop(&x->hub, "hub", threaded_hub_behaviour, &x->hub_loop, &x->hub_home), 0);
    ro__stream_port_init(&x->port, &x->pool, &x->hub, 0, &x->env);
    sim_init(&x->sim, &x->pool.lay, 0, 1, 2);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, env_thread, x), 0);
    loop_wait_flag(&x->hub_loop, &x->last_seen, "the shard's last segment at the hub");
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_false(x->failed);
    assert_int_equal(x->got, THREAD_STEPS / THREAD_T + 1);
    assert_int_equal(atomic_load(&x->port.waits), x->resumed); /* each wait was granted */
    uint32_t nfree, nwaiting;
    ro__grant_pool_counts(&x->pool.pool, &nfree, &nwaiting);
    assert_int_equal(nfree, 2);
    assert_int_equal(nwaiting, 0);
    /* Every sender has stopped (joined): the homes may close. */
    ro__actor_close_loop(&x->env_home);
    loop_finish(&x->env_loop);
    ro__actor_close_loop(&x->hub_home);
    loop_finish(&x->hub_loop);
    ro__seg_pool_free(&x->pool);
    fake_batch_free(&x->sim.b);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_discrete),  cmocka_unit_test(test_fill_box_gaussian),
        cmocka_unit_test(test_fill_box),       cmocka_unit_test(test_finish_partial),
        cmocka_unit_test(test_finish_empty),   cmocka_unit_test(test_wait_and_grant),
        cmocka_unit_test(test_threaded_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
