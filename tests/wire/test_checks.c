/*
 * Tests of the protocol's message checks (src/wire_check.c), one case per
 * rule: what passes, and for each way of breaking it the code and the
 * words of the message a peer gets back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/frame.h"
#include "wire/checks.h"

static char err[256];

static void expect_fail(int rc, int code, const char *words)
{
    assert_int_equal(rc, code);
    if (!strstr(err, words))
        fail_msg("'%s' does not say '%s'", err, words);
}

static void test_hello(void **state)
{
    (void)state;
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    ro_hello_rules_t learners = {.learners = true, .token = "s3cret"};
    ro_hello_rules_t trainers = {.trainers = true};
    bool trainer = true;
    h.protocol_version = 1;
    h.role = "learner";
    h.token = "s3cret";
    assert_int_equal(ro__check_hello(&h, &learners, &trainer, err, sizeof err), 0);
    assert_false(trainer);
    expect_fail(ro__check_hello(&h, &trainers, &trainer, err, sizeof err), RO_EPROTO,
                "role 'learner' is not served here");
    h.token = "s3cre";
    expect_fail(ro__check_hello(&h, &learners, &trainer, err, sizeof err), RO_EACCES,
                "missing or wrong token");
    h.token = "s3cretX";
    expect_fail(ro__check_hello(&h, &learners, &trainer, err, sizeof err), RO_EACCES, "wrong");
    h.token = NULL;
    expect_fail(ro__check_hello(&h, &learners, &trainer, err, sizeof err), RO_EACCES, "missing");
    h.role = "trainer";
    assert_int_equal(ro__check_hello(&h, &trainers, &trainer, err, sizeof err), 0);
    assert_true(trainer);
    h.role = NULL;
    expect_fail(ro__check_hello(&h, &trainers, &trainer, err, sizeof err), RO_EPROTO, "role ''");
    h.role = "trainer";
    h.protocol_version = 2;
    expect_fail(ro__check_hello(&h, &trainers, &trainer, err, sizeof err), RO_EPROTO,
                "protocol version 2 is not supported");
}

static void test_actions(void **state)
{
    (void)state;
    const ro_space_t disc = {.kind = RO_SPACE_DISCRETE, .n = 3};
    const float lo[2] = {-1, 0}, hi[2] = {1, 5};
    const ro_space_t box = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = lo, .high = hi};
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    int32_t d[3] = {0, 2, 1};
    a.seq = 9;
    a.discrete = d;
    a.n_discrete = 3;
    assert_int_equal(ro__check_actions(&a, 3, &disc, err, sizeof err), 0);
    expect_fail(ro__check_actions(&a, 4, &disc, err, sizeof err), RO_EPROTO,
                "actions for seq 9: 3 discrete values, expected 4");
    d[1] = 3;
    expect_fail(ro__check_actions(&a, 3, &disc, err, sizeof err), RO_ERANGE,
                "action 3 at 1 is outside [0, 3)");
    d[1] = -1;
    expect_fail(ro__check_actions(&a, 3, &disc, err, sizeof err), RO_ERANGE, "action -1 at 1");
    /* Box values for a discrete space, and both kinds at once. */
    float b[4] = {0.5f, 5.0f, -1.0f, 0.0f};
    a.box = b;
    a.n_box = 4;
    expect_fail(ro__check_actions(&a, 3, &disc, err, sizeof err), RO_EPROTO,
                "actions for seq 9: 3 discrete and 4 box values in one frame; the env's actions "
                "are discrete: expected 3 discrete values only");
    a.n_discrete = 0;
    /* The wrong kind says so, both ways (not "0 discrete values"). */
    expect_fail(ro__check_actions(&a, 3, &disc, err, sizeof err), RO_EPROTO,
                "actions for seq 9: 4 box values, but the env's actions are discrete: expected 3 "
                "discrete values");
    a.n_discrete = 3;
    a.n_box = 0;
    expect_fail(ro__check_actions(&a, 2, &box, err, sizeof err), RO_EPROTO,
                "actions for seq 9: 3 discrete values, but the env's actions are box: expected 4 "
                "box values");
    a.n_discrete = 0;
    a.n_box = 4;
    assert_int_equal(ro__check_actions(&a, 2, &box, err, sizeof err), 0);
    expect_fail(ro__check_actions(&a, 3, &box, err, sizeof err), RO_EPROTO,
                "4 box values, expected 6");
    b[3] = -0.001f; /* dimension 1 starts at 0 */
    expect_fail(ro__check_actions(&a, 2, &box, err, sizeof err), RO_ERANGE,
                "at 3 is outside [0, 5]");
    b[3] = NAN;
    expect_fail(ro__check_actions(&a, 2, &box, err, sizeof err), RO_ERANGE, "nan at 3");
    b[3] = INFINITY;
    expect_fail(ro__check_actions(&a, 2, &box, err, sizeof err), RO_ERANGE, "inf at 3");
}

static void test_spaces_and_welcome(void **state)
{
    (void)state;
    float lo[3] = {-1, -INFINITY, 0}, hi[3] = {1, INFINITY, 0};
    uint32_t shape[2] = {3, 1};
    Rollout__V1__Space obs = ROLLOUT__V1__SPACE__INIT, act = ROLLOUT__V1__SPACE__INIT;
    obs.kind = "box";
    obs.shape = shape;
    obs.n_shape = 2;
    obs.low = lo;
    obs.n_low = 3;
    obs.high = hi;
    obs.n_high = 3;
    act.kind = "discrete";
    act.n = 2;
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    spec.observation = &obs;
    spec.action = &act;
    spec.num_envs = 16;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = 1;
    w.spec = &spec;
    ro_space_t os, as;
    assert_int_equal(ro__check_welcome(&w, 64, &os, &as, err, sizeof err), 0);
    assert_int_equal(ro_space_size(&os), 3);
    assert_int_equal(as.n, 2);
    assert_ptr_equal(os.low, lo); /* bounds point into the message */
    spec.num_envs = 65;
    expect_fail(ro__check_welcome(&w, 64, &os, &as, err, sizeof err), RO_EPROTO,
                "num_envs 65 outside [1, 64]");
    spec.num_envs = 16;
    w.protocol_version = 3;
    expect_fail(ro__check_welcome(&w, 64, &os, &as, err, sizeof err), RO_EPROTO,
                "protocol version 3");
    w.protocol_version = 1;
    /* Observations must be a box; each space must hold together. */
    spec.observation = &act;
    expect_fail(ro__check_welcome(&w, 64, &os, &as, err, sizeof err), RO_EPROTO, "must be a box");
    spec.observation = &obs;
    lo[2] = 0.5f; /* above its high */
    expect_fail(ro__check_space(&obs, &os, err, sizeof err), RO_EPROTO, "bounds [0.5, 0] at 2");
    lo[2] = NAN;
    expect_fail(ro__check_space(&obs, &os, err, sizeof err), RO_EPROTO, "bounds [nan");
    lo[2] = 0;
    obs.n_high = 2;
    expect_fail(ro__check_space(&obs, &os, err, sizeof err), RO_EPROTO, "3 values with 3/2");
    obs.n_high = 3;
    shape[1] = 0;
    expect_fail(ro__check_space(&obs, &os, err, sizeof err), RO_EPROTO, "bad shape");
    shape[1] = 1u << 20; /* 3 * 2^20 values: over the limit */
    expect_fail(ro__check_space(&obs, &os, err, sizeof err), RO_EPROTO, "bad shape");
    shape[1] = 1;
    obs.n_shape = 5;
    expect_fail(ro__check_space(&obs, &os, err, sizeof err), RO_EPROTO, "with 5 dims");
    act.n = 0;
    expect_fail(ro__check_space(&act, &as, err, sizeof err), RO_EPROTO, "n = 0");
    act.kind = "tuple";
    expect_fail(ro__check_space(&act, &as, err, sizeof err), RO_EPROTO, "kind 'tuple'");
    expect_fail(ro__check_space(NULL, &as, err, sizeof err), RO_EPROTO, "without a space");
    w.spec = NULL;
    expect_fail(ro__check_welcome(&w, 64, &os, &as, err, sizeof err), RO_EPROTO,
                "without an env spec");
}

static void test_observations(void **state)
{
    (void)state;
    uint32_t env[2] = {0, 7}, fidx[1] = {1};
    uint64_t step64[2] = {1, 2};
    float obs[4] = {0}, rew[2] = {0}, fobs[2] = {0};
    protobuf_c_boolean flags[2] = {0, 1};
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.seq = 4;
    o.env = env;
    o.n_env = 2;
    o.step = step64;
    o.n_step = 2;
    o.obs = obs;
    o.n_obs = 4;
    o.reward = rew;
    o.n_reward = 2;
    o.terminated = o.truncated = o.episode_start = flags;
    o.n_terminated = o.n_truncated = o.n_episode_start = 2;
    o.final_index = fidx;
    o.n_final_index = 1;
    o.final_obs = fobs;
    o.n_final_obs = 2;
    assert_int_equal(ro__check_observations(&o, 2, 8, err, sizeof err), 0);
    expect_fail(ro__check_observations(&o, 2, 7, err, sizeof err), RO_EPROTO,
                "observations 4: env 7 outside [0, 7)");
    expect_fail(ro__check_observations(&o, 3, 8, err, sizeof err), RO_EPROTO,
                "inconsistent field lengths");
    fidx[0] = 2;
    expect_fail(ro__check_observations(&o, 2, 8, err, sizeof err), RO_EPROTO,
                "final_index 2 outside the batch");
    fidx[0] = 1;
    o.n_final_obs = 4;
    expect_fail(ro__check_observations(&o, 2, 8, err, sizeof err), RO_EPROTO, "inconsistent");
    o.n_final_obs = 2;
    o.n_reward = 1;
    expect_fail(ro__check_observations(&o, 2, 8, err, sizeof err), RO_EPROTO, "inconsistent");
    o.n_reward = 2;
    o.n_env = o.n_step = o.n_reward = o.n_terminated = o.n_truncated = o.n_episode_start = 0;
    o.n_obs = o.n_final_index = o.n_final_obs = 0;
    expect_fail(ro__check_observations(&o, 2, 8, err, sizeof err), RO_EPROTO,
                "inconsistent"); /* an empty batch is never sent */
}

/* The first frame of a connection must be a hello that passes. */
static void test_first_frame(void **state)
{
    (void)state;
    ro_hello_rules_t rules = {.learners = true, .token = "t"};
    bool trainer;
    Rollout__V1__Frame f = ROLLOUT__V1__FRAME__INIT;
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
    f.actions = &a;
    expect_fail(ro__check_first_frame(&f, &rules, &trainer, err, sizeof err), RO_EPROTO,
                "expected hello first, got actions");
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.role = "learner";
    h.token = "t";
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &h;
    assert_int_equal(ro__check_first_frame(&f, &rules, &trainer, err, sizeof err), 0);
    h.token = "u";
    expect_fail(ro__check_first_frame(&f, &rules, &trainer, err, sizeof err), RO_EACCES, "token");
    /* A peer's role is shown escaped: one line, no terminal sequence. */
    h.role = "x\n\x1b[2J";
    expect_fail(ro__check_first_frame(&f, &rules, &trainer, err, sizeof err), RO_EPROTO,
                "role 'x\\x0a\\x1b[2J' is not served here");
}

/* A node's Upgrade: an absolute path that fits a sockaddr_un, 16 bytes
 * of nonce; anything else named. */
static void test_upgrade(void **state)
{
    (void)state;
    uint8_t nonce[17] = {0};
    char path[120];
    Rollout__V1__Upgrade u = ROLLOUT__V1__UPGRADE__INIT;
    u.path = "/tmp/rollout-node.abc/upgrade.sock";
    u.nonce.data = nonce;
    u.nonce.len = 16;
    assert_int_equal(ro__check_upgrade(&u, err, sizeof err), 0);
    u.nonce.len = 17;
    expect_fail(ro__check_upgrade(&u, err, sizeof err), RO_EPROTO, "nonce of 17 bytes, not 16");
    u.nonce.len = 0;
    expect_fail(ro__check_upgrade(&u, err, sizeof err), RO_EPROTO, "nonce of 0 bytes");
    u.nonce.len = 16;
    u.path = "relative.sock";
    expect_fail(ro__check_upgrade(&u, err, sizeof err), RO_EPROTO, "not an absolute socket path");
    u.path = NULL;
    expect_fail(ro__check_upgrade(&u, err, sizeof err), RO_EPROTO, "a path of 0 bytes");
    memset(path, 'a', sizeof path);
    path[0] = '/';
    path[108] = '\0'; /* one byte over sun_path's 107 */
    u.path = path;
    expect_fail(ro__check_upgrade(&u, err, sizeof err), RO_EPROTO, "a path of 108 bytes");
    path[107] = '\0';
    assert_int_equal(ro__check_upgrade(&u, err, sizeof err), 0);
}

/* A GetState's or SetState's envs: 1..num_envs of them, each below
 * num_envs and named once, one state each for a set; the scratch bitmap
 * is cleared on every call. */
static void test_state_request(void **state)
{
    (void)state;
    uint8_t seen[2];
    const uint32_t ok[] = {9, 0, 3}, dup[] = {1, 4, 1}, out[] = {2, 10};
    const uint32_t all[11] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9};
    assert_int_equal(ro__check_state_request(ok, 3, 0, false, 10, seen, err, sizeof err), 0);
    assert_int_equal(ro__check_state_request(ok, 3, 3, true, 10, seen, err, sizeof err), 0);
    assert_int_equal(ro__check_state_request(all, 10, 0, false, 10, seen, err, sizeof err), 0);
    expect_fail(ro__check_state_request(dup, 3, 0, false, 10, seen, err, sizeof err), RO_EPROTO,
                "get_state: env 1 is named twice (again at 2)");
    expect_fail(ro__check_state_request(out, 2, 2, true, 10, seen, err, sizeof err), RO_EPROTO,
                "set_state: env 10 at 1 is outside [0, 10)");
    expect_fail(ro__check_state_request(ok, 0, 0, false, 10, seen, err, sizeof err), RO_EPROTO,
                "get_state of 0 envs; the node has 10");
    expect_fail(ro__check_state_request(all, 11, 0, false, 10, seen, err, sizeof err), RO_EPROTO,
                "get_state of 11 envs; the node has 10");
    expect_fail(ro__check_state_request(ok, 3, 2, true, 10, seen, err, sizeof err), RO_EPROTO,
                "set_state of 3 envs with 2 states (expected 3)");
    expect_fail(ro__check_state_request(ok, 3, 1, false, 10, seen, err, sizeof err), RO_EPROTO,
                "get_state of 3 envs with 1 states (expected 0)");
    /* The same envs again: the bitmap of the last call does not carry over. */
    assert_int_equal(ro__check_state_request(ok, 3, 0, false, 10, seen, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello),
        cmocka_unit_test(test_actions),
        cmocka_unit_test(test_spaces_and_welcome),
        cmocka_unit_test(test_observations),
        cmocka_unit_test(test_first_frame),
        cmocka_unit_test(test_upgrade),
        cmocka_unit_test(test_state_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
