/*
 * The node's threads chosen for the work (programs/node/work_probe.c), on
 * a node record with a real env, ro__env_create and ro__env_step wrapped
 * (-Wl,--wrap) to fail on demand and to check the probe's actions. Only a
 * SEED node without --workers probes, and only once an env is open; a
 * Python env keeps workers unprobed; an env that cannot be made or
 * stepped leaves the plan and says its step could not be timed. The probe
 * steps with the first action the mask allows (gridworld) and a box at
 * the middle of its bounds (pendulum). Every outcome here holds whatever
 * the step costs: on one CPU workers save nothing (the loop steps the
 * envs, spinning 300 us unless --spin-us was given); with 64 CPUs and
 * frames of 4 M envs they save more than any hand-off (workers stay).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "node/node_internal.h"
#include "runtime/error.h"

#define ERRLEN 512

/* What the wrapped calls do and saw. Reset per test. */
static struct {
    bool fail_create, fail_step;
    const ro_space_layout_t *lay; /* the probed env's (ABI 2), to check actions against */
    uint32_t steps, wrong_actions, masked_first; /* masked_first: steps where 0 was masked */
    float box0;                                  /* the first box float of the last step */
} w;

int __real_ro__env_create(const ro_env_kind_t *k, void **env, const ro_env_arg_t *args,
                          size_t nargs, uint64_t seed, uint32_t index, char *err, size_t errlen);
int __wrap_ro__env_create(const ro_env_kind_t *k, void **env, const ro_env_arg_t *args,
                          size_t nargs, uint64_t seed, uint32_t index, char *err, size_t errlen);
int __wrap_ro__env_create(const ro_env_kind_t *k, void **env, const ro_env_arg_t *args,
                          size_t nargs, uint64_t seed, uint32_t index, char *err, size_t errlen)
{
    if (w.fail_create)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory");
    return __real_ro__env_create(k, env, args, nargs, seed, index, err, errlen);
}

int __real_ro__env_step(const ro_env_kind_t *k, void *env, const int32_t *disc, const float *box,
                        void *const *tensors, uint8_t *mask, ro_step_t *st, uint32_t agents);
int __wrap_ro__env_step(const ro_env_kind_t *k, void *env, const int32_t *disc, const float *box,
                        void *const *tensors, uint8_t *mask, ro_step_t *st, uint32_t agents);
int __wrap_ro__env_step(const ro_env_kind_t *k, void *env, const int32_t *disc, const float *box,
                        void *const *tensors, uint8_t *mask, ro_step_t *st, uint32_t agents)
{
    if (w.fail_step)
        return RO_EIO;
    w.steps++;
    const ro_space_layout_t *l = w.lay;
    for (uint32_t a = 0; l && mask && a < agents; a++) { /* the mask the last step left */
        const uint8_t *row = mask + (size_t)a * l->mask_width + l->disc_mask[0];
        uint32_t first = 0;
        while (first + 1 < l->disc_n[0] && !row[first])
            first++;
        w.wrong_actions += disc[a * l->ndisc] != (int32_t)first;
        w.masked_first += first > 0;
    }
    if (box)
        w.box0 = box[0];
    return __real_ro__env_step(k, env, disc, box, tensors, mask, st, agents);
}

static struct ro_node node;

/* A SEED node of env (a plugin path or a built-in), 5 envs, on ncpus CPUs. */
static void node_of(const char *env, int ncpus)
{
    memset(&node, 0, sizeof node);
    memset(&w, 0, sizeof w);
    char err[ERRLEN];
    assert_int_equal(ro__env_open(&node.kind, env, err, sizeof err), 0);
    if (node.kind.vt2) { /* open_env's layout */
        assert_int_equal(ro__env_kind_layout(&node.kind, NULL, 0, 1, &node.layout, err, sizeof err),
                         0);
        w.lay = &node.layout;
    }
    node.cfg.learner = RO_LEARNER_REMOTE;
    node.cfg.num_envs = 5;
    node.cfg.seed = 9;
    node.topo.ncpus = ncpus;
}

static int teardown(void **state)
{
    (void)state;
    ro__layout_free(&node.layout);
    ro__env_close(&node.kind);
    return 0;
}

/* Other modes, --workers, or no env open: nothing probed, nothing said. */
static void test_not_probed(void **state)
{
    (void)state;
    node_of("cartpole", 1);
    node.cfg.learner = RO_LEARNER_LOCAL;
    ro__node_choose_workers(&node);
    node.cfg.learner = RO_LEARNER_REMOTE;
    node.cfg.workers_given = true;
    ro__node_choose_workers(&node);
    node.cfg.workers_given = false;
    const ro_env_kind_t k = node.kind;
    node.kind.vt = NULL; /* --print-topology: no env */
    ro__node_choose_workers(&node);
    node.kind = k;
    assert_int_equal(w.steps, 0);
    assert_string_equal(node.threads_why, "");
    assert_false(node.cfg.envs_on_loop);
    assert_true(node.env_step_ns == 0);
    static char host; /* a Python env: its steps cross to a process */
    node.kind.py = (struct ro_pyhost *)&host;
    ro__node_choose_workers(&node);
    node.kind.py = NULL;
    assert_string_equal(node.threads_why, " (chosen: a Python env)");
    assert_false(node.cfg.envs_on_loop);
    assert_int_equal(w.steps, 0);
}

/* An env that cannot be made, or fails its step: the default plan. */
static void test_not_timed(void **state)
{
    (void)state;
    node_of("cartpole", 1);
    for (int k = 0; k < 2; k++) {
        w.fail_create = k == 0, w.fail_step = k == 1;
        node.threads_why[0] = '\0';
        ro__node_choose_workers(&node);
        assert_string_equal(node.threads_why, " (the env's step could not be timed)");
        assert_false(node.cfg.envs_on_loop);
        assert_int_equal(node.cfg.spin_us, 0);
        assert_true(node.env_step_ns == 0);
    }
}

/* One CPU: workers save nothing, whatever the step costs; the loop steps
 * the envs and spins for the answers (unless --spin-us was given). The
 * batch is the hub's default, half the envs rounded up. */
static void test_one_cpu_loop(void **state)
{
    (void)state;
    node_of("cartpole", 1);
    ro__node_choose_workers(&node);
    assert_true(w.steps > 0 && node.env_step_ns > 0);
    assert_true(node.cfg.envs_on_loop);
    assert_int_equal(node.cfg.spin_us, 300);
    assert_non_null(strstr(node.threads_why, ", a frame of 3 "));
    assert_non_null(strstr(node.threads_why, "1 workers would save 0.0 us, less than a "
                                             "hand-off's 50 us: the loop steps the envs)"));
    node.cfg.envs_on_loop = false;
    node.cfg.spin_given = true;
    node.cfg.spin_us = 20;
    ro__node_choose_workers(&node);
    assert_true(node.cfg.envs_on_loop);
    assert_int_equal(node.cfg.spin_us, 20);
}

/* 64 CPUs and frames of 4 M envs: workers save more than a hand-off. */
static void test_big_frames_keep_workers(void **state)
{
    (void)state;
    node_of("cartpole", 64);
    node.cfg.batch = 1u << 22;
    ro__node_choose_workers(&node);
    assert_true(node.env_step_ns > 0);
    assert_false(node.cfg.envs_on_loop);
    assert_int_equal(node.cfg.spin_us, 0);
    assert_non_null(strstr(node.threads_why, ", a frame of 4194304 "));
    assert_non_null(strstr(node.threads_why, "64 workers would save"));
    assert_non_null(strstr(node.threads_why, "more than a hand-off's 50 us)"));
}

/* The probe's actions: the first the mask allows (gridworld, 2 agents);
 * a box at the middle of its bounds (pendulum, [-2, 2]). */
static void test_probe_actions(void **state)
{
    (void)state;
    node_of(RO_GRIDWORLD_PATH, 1);
    assert_true(node.layout.mask_width > 0 && node.layout.agents == 2);
    ro__node_choose_workers(&node);
    assert_true(w.steps > 0);
    assert_int_equal(w.wrong_actions, 0);
    assert_true(w.masked_first > 0); /* the mask did forbid the first action */
    assert_true(node.cfg.envs_on_loop);
    teardown(state);
    node_of("pendulum", 1);
    w.box0 = 99.0f;
    ro__node_choose_workers(&node);
    assert_true(w.steps > 0);
    assert_true(w.box0 == 0.0f);
}

int main(void)
{
#define T(name) cmocka_unit_test_teardown(name, teardown)
    const struct CMUnitTest tests[] = {
        T(test_not_probed),    T(test_not_timed),
        T(test_one_cpu_loop),  T(test_big_frames_keep_workers),
        T(test_probe_actions),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
