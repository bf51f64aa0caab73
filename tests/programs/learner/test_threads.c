/*
 * rollout-learner's threads chosen for the work (programs/learner/
 * threads.c), with the forward lanes' start, the topology read and the
 * forward pass wrapped (-Wl,--wrap): the test sets the CPUs, and a "dear"
 * pass lasts at least 60 us by construction (it waits for the clock to
 * pass that), above the 50 us hand-off, so no outcome depends on how fast
 * the machine is. Lanes already started: nothing. A node without forward
 * passes (stream, push): no pass timed, the loop runs the lanes and spins
 * 50 us (unless --spin-us). A dear pass over a frame's rows (clamped to
 * --batch) gets a worker per CPU but the loop's, and one less for a node
 * on this host, when that leaves two or more; one worker would only move
 * the passes off the loop: none then. A pass that cannot be timed (no
 * memory) keeps the loop. A lane start's failure is returned.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "learner/learner.h"
#include "runtime/clock.h"
#include "runtime/error.h"

#define ERRLEN 256
#define DEAR_NS 60000u

/* What the wrapped calls do and saw. Reset per test. */
static struct {
    int ncpus, start_rc;
    bool fail_ws;
    uint32_t starts, passes, pass_rows;
    uint32_t workers;
    bool overcommit;
    ro_job_done_fn on_done;
    void *ctx;
} w;

int __wrap_ro__forward_start(ro_forward_t *fw, uv_loop_t *loop, uint32_t workers, bool overcommit,
                             ro_job_done_fn on_done, void *ctx, char *err, size_t errlen);
int __wrap_ro__forward_start(ro_forward_t *fw, uv_loop_t *loop, uint32_t workers, bool overcommit,
                             ro_job_done_fn on_done, void *ctx, char *err, size_t errlen)
{
    (void)fw, (void)loop;
    w.starts++;
    w.workers = workers, w.overcommit = overcommit, w.on_done = on_done, w.ctx = ctx;
    return w.start_rc ? ro__errorf(err, errlen, w.start_rc, "cannot start %u workers", workers) : 0;
}

int __wrap_ro__topology_read(ro_topology_t *t, char *err, size_t errlen);
int __wrap_ro__topology_read(ro_topology_t *t, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    memset(t, 0, sizeof *t);
    t->ncpus = w.ncpus;
    return 0;
}

int __real_ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch);
int __wrap_ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch);
int __wrap_ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch)
{
    return w.fail_ws ? RO_ENOMEM : __real_ro__policy_ws_new(out, p, max_batch);
}

/* A dear pass: it returns once the clock has moved DEAR_NS on. */
void __wrap_ro__policy_act_masked(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n,
                                  ro_rng_t *const *rngs, const uint8_t *mask, int32_t *act_i,
                                  float *act_f, const ro_act_stats_t *stats,
                                  const ro_policy_carry_t *carry);
void __wrap_ro__policy_act_masked(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n,
                                  ro_rng_t *const *rngs, const uint8_t *mask, int32_t *act_i,
                                  float *act_f, const ro_act_stats_t *stats,
                                  const ro_policy_carry_t *carry)
{
    (void)p, (void)ws, (void)rngs, (void)mask, (void)act_i, (void)act_f, (void)stats, (void)carry;
    w.passes++;
    w.pass_rows = n;
    const uint64_t t0 = ro__now_ns();
    while (ro__now_ns() - t0 < DEAR_NS)
        ;
}

/* A learner of an MLP for Box(4) -> Discrete(2), --batch 256, quiet. */
static int setup(void **state)
{
    memset(&w, 0, sizeof w);
    learner_t *L = calloc(1, sizeof *L);
    assert_non_null(L);
    const ro_space_t os = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {4}};
    const ro_space_t as = {.kind = RO_SPACE_DISCRETE, .n = 2};
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .activation = RO_ACT_TANH, .seed = 1};
    spec.hidden[0] = 8;
    spec.nhidden = 1;
    char err[ERRLEN];
    assert_int_equal(ro__policy_new(&L->policy, &spec, &os, &as, err, sizeof err), 0);
    L->act_ndisc = L->act_dim = 1;
    L->cfg.batch = 256;
    L->cfg.quiet = true;
    L->cfg.overcommit = true;
    *state = L;
    return 0;
}

static int teardown(void **state)
{
    learner_t *L = *state;
    ro__policy_free(L->policy);
    free(L);
    return 0;
}

static int choose(learner_t *L, uint32_t rows, bool local)
{
    char err[ERRLEN];
    L->fw.lanes = NULL;
    L->spin.cap_ns = 12345;
    return ro__learner_choose_threads(L, rows, local, ro__learner_job_done, err, sizeof err);
}

/* Lanes already running (--workers, or an earlier welcome): nothing. */
static void test_already_started(void **state)
{
    learner_t *L = *state;
    static ro_lane_t lane;
    L->fw.lanes = &lane;
    L->cfg.workers = 5;
    char err[ERRLEN];
    assert_int_equal(
        ro__learner_choose_threads(L, 64, false, ro__learner_job_done, err, sizeof err), 0);
    assert_int_equal(w.starts + w.passes, 0);
    assert_int_equal(L->cfg.workers, 5);
    L->fw.lanes = NULL;
}

/* No forward passes (a stream node, a push): the loop, spinning 50 us,
 * or as --spin-us said. */
static void test_no_passes(void **state)
{
    learner_t *L = *state;
    w.ncpus = 8;
    assert_int_equal(choose(L, 0, false), 0);
    assert_int_equal(w.passes, 0);
    assert_int_equal(w.starts, 1);
    assert_int_equal(w.workers, 0);
    assert_true(w.overcommit);
    assert_ptr_equal(w.on_done, ro__learner_job_done);
    assert_ptr_equal(w.ctx, L);
    assert_int_equal(L->forward_ns, 0);
    assert_int_equal(L->spin.cap_ns, 50000);
    L->cfg.spin_given = true;
    assert_int_equal(choose(L, 0, false), 0);
    assert_int_equal(L->spin.cap_ns, 12345);
}

/* A dear pass over a frame's rows (at most --batch): a worker per CPU but
 * the loop's (and the node's, on this host); the loop does not spin. */
static void test_dear_pass_workers(void **state)
{
    learner_t *L = *state;
    w.ncpus = 8;
    assert_int_equal(choose(L, 1000, false), 0);
    assert_int_equal(w.passes, 3); /* the fastest of three */
    assert_int_equal(w.pass_rows, 256);
    assert_int_equal(L->forward_rows, 256);
    assert_true(L->forward_ns >= DEAR_NS);
    assert_int_equal(w.workers, 7);
    assert_int_equal(L->cfg.workers, 7);
    assert_int_equal(L->spin.cap_ns, 0);
    assert_int_equal(choose(L, 100, true), 0);
    assert_int_equal(L->forward_rows, 100);
    assert_int_equal(w.workers, 6);
}

/* One worker would only move the passes off the loop: none, however dear
 * the pass. */
static void test_few_cpus_keep_the_loop(void **state)
{
    learner_t *L = *state;
    w.ncpus = 2;
    assert_int_equal(choose(L, 64, false), 0);
    assert_true(L->forward_ns >= DEAR_NS);
    assert_int_equal(w.workers, 0);
    assert_int_equal(L->spin.cap_ns, 50000);
    w.ncpus = 3;
    assert_int_equal(choose(L, 64, true), 0); /* the node's loop takes one */
    assert_int_equal(w.workers, 0);
    assert_int_equal(choose(L, 64, false), 0);
    assert_int_equal(w.workers, 2);
}

/* A pass that cannot be timed (no memory): the loop; a start that fails
 * is returned with its words. */
static void test_untimed_and_start_failure(void **state)
{
    learner_t *L = *state;
    w.ncpus = 8;
    w.fail_ws = true;
    assert_int_equal(choose(L, 64, false), 0);
    assert_int_equal(w.passes, 0);
    assert_int_equal(L->forward_ns, 0);
    assert_int_equal(w.workers, 0);
    w.fail_ws = false;
    w.start_rc = RO_EINVAL;
    char err[ERRLEN];
    L->fw.lanes = NULL;
    assert_int_equal(
        ro__learner_choose_threads(L, 64, false, ro__learner_job_done, err, sizeof err), RO_EINVAL);
    assert_string_equal(err, "cannot start 7 workers");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_already_started),           T(test_no_passes),
        T(test_dear_pass_workers),         T(test_few_cpus_keep_the_loop),
        T(test_untimed_and_start_failure),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
