/* Unit tests of src/vecenv (vec.c, vec_step.c, vec_async.c): the engine's
 * envs step the same whatever its threads; each autoreset mode; reseeds;
 * send/recv equal to step; refusals name the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ro_build_config.h"
#include "runtime/error.h"
#include "vecenv/vec.h"
#include "vecenv/vec_async.h"

static ro_vec_t *make(const char *env, uint32_t n, int threads, ro_autoreset_t mode, uint32_t batch)
{
    ro_env_arg_t args[] = {{"max_episode_steps", "40"}};
    ro_vec_config_t cfg = {.env = env,
                           .args = args,
                           .nargs = 1,
                           .num_envs = n,
                           .seed = 7,
                           .autoreset = mode,
                           .threads = threads,
                           .check_finite = true,
                           .batch_size = batch};
    ro_vec_t *v = NULL;
    char err[256];
    int rc = ro__vec_new(&v, &cfg, err, sizeof err);
    if (rc)
        fail_msg("ro__vec_new: %s", err);
    assert_int_equal(v->threads, threads > 0 ? (uint32_t)threads : v->threads);
    assert_int_equal(ro__vec_reset(v, NULL, NULL, NULL, err, sizeof err), 0);
    return v;
}

/* actions_at writes step t's actions: env j's action depends on (t, j). */
static void actions_at(ro_vec_t *v, uint32_t t)
{
    for (uint32_t j = 0; j < v->n; j++) {
        if (v->lay.ndisc)
            v->act_i[j] = (int32_t)((t * 7 + j * 3) % 2);
        else
            v->act_f[j] = (float)((int)((t * 5 + j) % 9) - 4) * 0.5f;
    }
}

/* step_both steps a and b with step t's actions and checks they give the
 * same observations, rewards and flags. */
static void step_both(ro_vec_t *a, ro_vec_t *b, uint32_t t)
{
    char err[128];
    actions_at(a, t);
    actions_at(b, t);
    assert_int_equal(ro__vec_step(a, err, sizeof err), 0);
    assert_int_equal(ro__vec_step(b, err, sizeof err), 0);
    assert_memory_equal(a->obs[0], b->obs[0], a->n * a->lay.t[0].row_bytes);
    assert_memory_equal(a->reward, b->reward, a->n * sizeof *a->reward);
    assert_memory_equal(a->terminated, b->terminated, a->n);
    assert_memory_equal(a->truncated, b->truncated, a->n);
}

static void threads_do_not_change_episodes(void **state)
{
    (void)state;
    const char *envs[] = {"cartpole", "pendulum"};
    for (int e = 0; e < 2; e++) {
        ro_vec_t *a = make(envs[e], 96, 1, RO_AUTORESET_NEXT_STEP, 0);
        ro_vec_t *b = make(envs[e], 96, 3, RO_AUTORESET_NEXT_STEP, 0);
        for (uint32_t t = 0; t < 300; t++)
            step_both(a, b, t);
        ro__vec_free(a);
        ro__vec_free(b);
    }
}

/* A MuJoCo env's step runs in parts spread over the threads (vec_pool.h's
 * jobs in parts) when a thread has few envs: the same episodes on 1 thread
 * (each env's parts in a row) as on 3 (parts of one env on several
 * threads). Hopper, whose episodes end often: resets and steps mixed in one
 * job. */
static void parts_do_not_change_episodes(void **state)
{
    (void)state;
#if RO_HAVE_MUJOCO
    ro_vec_t *a = make("hopper", 8, 1, RO_AUTORESET_NEXT_STEP, 0);
    ro_vec_t *b = make("hopper", 8, 3, RO_AUTORESET_NEXT_STEP, 0);
    assert_false(a->in_parts); /* one thread: nothing to spread */
    assert_true(b->in_parts);
    assert_int_equal(b->pool.items_cap, 8);
    uint32_t ends = 0;
    for (uint32_t t = 0; t < 150; t++) {
        step_both(a, b, t);
        for (uint32_t j = 0; j < a->n; j++)
            ends += a->terminated[j] | a->truncated[j];
    }
    assert_true(ends > 0); /* resets happened mid-run */
    assert_int_equal(a->failures, 0);
    ro__vec_free(a);
    ro__vec_free(b);
    /* Many envs per thread: whole env steps, one to a chunk. */
    ro_vec_t *c = make("hopper", 40, 2, RO_AUTORESET_NEXT_STEP, 0);
    assert_false(c->in_parts);
    ro__vec_free(c);
#else
    skip();
#endif
}

static void autoreset_modes(void **state)
{
    (void)state;
    char err[256];
    /* Pendulum truncates at 40: every env at step 40, all at once. */
    ro_vec_t *next = make("pendulum", 4, 1, RO_AUTORESET_NEXT_STEP, 0);
    ro_vec_t *same = make("pendulum", 4, 1, RO_AUTORESET_SAME_STEP, 0);
    ro_vec_t *off = make("pendulum", 4, 1, RO_AUTORESET_DISABLED, 0);
    for (uint32_t t = 1; t <= 41; t++) {
        actions_at(next, t);
        actions_at(same, t);
        actions_at(off, t);
        assert_int_equal(ro__vec_step(next, err, sizeof err), 0);
        assert_int_equal(ro__vec_step(same, err, sizeof err), 0);
        int rc = ro__vec_step(off, err, sizeof err);
        if (t <= 40) {
            assert_int_equal(rc, 0);
            assert_int_equal(next->truncated[0], t == 40);
            assert_int_equal(same->truncated[0], t == 40);
        }
        if (t == 40) {
            /* SAME_STEP: the last observation aside, the first in obs; the
             * NEXT_STEP env returns that same last observation. */
            assert_memory_equal(same->final_obs[0], next->obs[0], 4 * next->lay.t[0].row_bytes);
            assert_memory_not_equal(same->obs[0], next->obs[0], next->lay.t[0].row_bytes);
        }
        if (t == 41) {
            /* NEXT_STEP: this step was the reset: no reward, no flag. */
            assert_true(next->reward[0] == 0.0);
            assert_int_equal(next->truncated[0] | next->terminated[0], 0);
            /* DISABLED: refused, naming the env and the way out. */
            assert_int_equal(rc, RO_EINVAL);
            assert_non_null(strstr(err, "env 0 ended"));
            assert_non_null(strstr(err, "reset_mask"));
        }
    }
    uint8_t mask[4] = {1, 1, 1, 1};
    assert_int_equal(ro__vec_reset(off, NULL, NULL, mask, err, sizeof err), 0);
    assert_int_equal(ro__vec_step(off, err, sizeof err), 0);
    ro__vec_free(next);
    ro__vec_free(same);
    ro__vec_free(off);
}

static void reseed_repeats_one_env(void **state)
{
    (void)state;
    char err[256];
    ro_vec_t *v = make("cartpole", 3, 1, RO_AUTORESET_NEXT_STEP, 0);
    uint64_t seeds[3] = {11, 0, 11};
    uint8_t has[3] = {1, 0, 1};
    assert_int_equal(ro__vec_reset(v, seeds, has, NULL, err, sizeof err), 0);
    float first[3][4];
    memcpy(first, v->obs[0], sizeof first);
    assert_int_equal(ro__vec_reset(v, seeds, has, NULL, err, sizeof err), 0);
    /* Reseeded envs start their episode over; env 1 went on to another. */
    assert_memory_equal(first[0], v->obs[0], sizeof first[0]);
    assert_memory_equal(first[2], (float *)v->obs[0] + 8, sizeof first[2]);
    assert_memory_not_equal(first[1], (float *)v->obs[0] + 4, sizeof first[1]);
    /* Env 0 and env 2 share a seed, not a stream: (seed, index). */
    assert_memory_not_equal(first[0], first[2], sizeof first[0]);
    ro__vec_free(v);
}

static void send_recv_equals_step(void **state)
{
    (void)state;
    char err[256];
    ro_vec_t *s = make("pendulum", 8, 1, RO_AUTORESET_NEXT_STEP, 0);
    ro_vec_t *a = make("pendulum", 8, 2, RO_AUTORESET_NEXT_STEP, 4);
    const size_t row = s->lay.t[0].row_bytes;
    float want[30][8][3];
    for (uint32_t t = 0; t < 30; t++) {
        for (uint32_t j = 0; j < 8; j++)
            s->act_f[j] = 0.25f * (float)j - 1.0f;
        assert_int_equal(ro__vec_step(s, err, sizeof err), 0);
        memcpy(want[t], s->obs[0], 8 * row);
    }
    uint32_t seen[8] = {0}, ids[8];
    for (int round = 0; round < 70; round++) {
        assert_int_equal(ro__vec_recv(a, ids, err, sizeof err), 0);
        for (uint32_t i = 0; i < a->batch; i++) {
            uint32_t j = ids[i];
            if (seen[j] >= 1 && seen[j] <= 30)
                assert_memory_equal((float *)a->obs[0] + 3 * j, want[seen[j] - 1][j], row);
            seen[j]++;
            a->act_f[j] = 0.25f * (float)j - 1.0f;
        }
        assert_int_equal(ro__vec_send(a, ids, a->batch, err, sizeof err), 0);
    }
    /* Refused, by name: an env not handed out, an env already stepping. */
    uint32_t bad = ids[0];
    assert_int_equal(ro__vec_send(a, &bad, 1, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "stepping already"));
    assert_int_equal(ro__vec_step(a, err, sizeof err), RO_EINVAL);
    ro__vec_free(s);
    ro__vec_free(a);
}

static void refusals_name_the_problem(void **state)
{
    (void)state;
    char err[256];
    ro_vec_t *v = NULL;
    ro_env_arg_t bogus[] = {{"bogus", "1"}};
    ro_vec_config_t cfg = {.env = "cartpole", .args = bogus, .nargs = 1, .num_envs = 4};
    assert_int_not_equal(ro__vec_new(&v, &cfg, err, sizeof err), 0);
    assert_null(v);
    assert_non_null(strstr(err, "bogus"));
    cfg = (ro_vec_config_t){.env = "no_such_env", .num_envs = 4};
    assert_int_not_equal(ro__vec_new(&v, &cfg, err, sizeof err), 0);
    assert_non_null(strstr(err, "no_such_env"));
    cfg = (ro_vec_config_t){.env = "cartpole", .num_envs = 0};
    assert_int_equal(ro__vec_new(&v, &cfg, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "num_envs"));
    cfg = (ro_vec_config_t){.env = "cartpole", .num_envs = 4, .batch_size = 5};
    assert_int_equal(ro__vec_new(&v, &cfg, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "batch_size"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_do_not_change_episodes),
        cmocka_unit_test(parts_do_not_change_episodes),
        cmocka_unit_test(autoreset_modes),
        cmocka_unit_test(reseed_repeats_one_env),
        cmocka_unit_test(send_recv_equals_step),
        cmocka_unit_test(refusals_name_the_problem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
