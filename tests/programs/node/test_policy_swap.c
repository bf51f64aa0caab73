/*
 * Pushed policies at a node (programs/node/policy_swap.c), on a node record
 * with two lanes whose actors the test runs by hand: a push for the env's
 * spaces asks every lane to switch, and the node takes the new policy once
 * all have; a push while the lanes switch waits, and a later one replaces
 * it (the lanes go to the newest); a lane that could not switch keeps the
 * old policy alive (retired, not freed); a push for other spaces or
 * another recurrent cell is refused by name and changes nothing; after 8
 * failed switches pushes are refused. LeakSanitizer (the ASan build) sees
 * every superseded policy freed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "node/node_internal.h"
#include "policy/params.h"
#include "wire/pb_alloc.h"
#include "policy_fixture.h"
#include "runtime/error.h"

#define NLANES 2
#define OBS_DIM 4

typedef struct fixture {
    struct ro_node n;
    uint32_t asked[NLANES]; /* RO_MSG_POLICY each lane received */
    const ro_policy_t *asked_to[NLANES];
    bool fail[NLANES]; /* the lane's switch fails (out of memory) */
    ro_space_t obs, act;
} fixture_t;

static fixture_t *F;

/* schedule_now runs the actor at once: the test's thread is its home. */
static void schedule_now(ro_actor_t *a)
{
    while (ro__actor_run(a))
        ;
}

/* A lane as the node sees it: told to switch, it records what to and sets
 * swap_ok as the test says (the switch itself is the lane's, tested in
 * tests/actors/local/test_learner_actor.c). */
static void lane_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_learner_t *l = ro__container_of(self, ro_learner_t, actor);
    const uint32_t i = (uint32_t)(l - F->n.lanes);
    assert_int_equal(msg->type, RO_MSG_POLICY);
    F->asked[i]++;
    F->asked_to[i] = l->swap_to;
    l->swap_ok = !F->fail[i];
}

/* policy_with builds an MLP for obs_dim floats and Discrete(2), from seed,
 * with a GRU of cell units (0: none). */
static ro_policy_t *policy_with(uint32_t obs_dim, uint64_t seed, uint32_t cell)
{
    const ro_space_t obs = obs_box(obs_dim), act = act_discrete(2);
    ro_policy_spec_t spec = mlp_spec(8, 0, RO_ACT_TANH, seed);
    if (cell) {
        spec.cell = RO_CELL_GRU;
        spec.cell_hidden = cell;
    }
    ro_policy_t *p = NULL;
    char err[ERRLEN];
    assert_int_equal(ro__policy_new(&p, &spec, &obs, &act, err, sizeof err), 0);
    return p;
}

/* push sends policy p's weights (version v) to the node as a trainer
 * sends them, a PolicyParams message; returns the node's answer. */
static int push(fixture_t *f, const ro_policy_t *p, uint64_t v, char *err, size_t errlen)
{
    const char *path = tmp_path("push.pb");
    assert_int_equal(ro__policy_save(p, path, err, errlen), 0);
    ro_policy_params_t pp;
    assert_int_equal(ro__policy_params_read(&pp, path, err, errlen), 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(ro__policy_params_encode(&pp, &buf, &len), 0);
    Rollout__V1__PolicyParams *m = NULL;
    ro_pb_alloc_t alloc;
    assert_int_equal(ro__policy_params_unpack(&m, &alloc, buf, len, "push", err, errlen), 0);
    m->version = v;
    int rc = ro__node_policy_push(&f->n, m, err, errlen);
    rollout__v1__policy_params__free_unpacked(m, &alloc.base);
    free(buf);
    ro__policy_params_free(&pp);
    return rc;
}

/* switched: every lane answers the switch it was asked for. */
static void switched(fixture_t *f)
{
    for (uint32_t i = 0; i < NLANES; i++)
        ro__node_policy_switched(&f->n, &f->n.lanes[i]);
}

static int group_setup(void **state)
{
    (void)state;
    return tmpdir_create("policy_swap");
}

static int group_teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    F = f;
    f->obs = obs_box(OBS_DIM);
    f->act = act_discrete(2);
    char err[ERRLEN];
    assert_int_equal(ro__layout_from_abi1(&f->n.layout, &f->obs, &f->act, "t", err, sizeof err), 0);
    f->n.obs_space = f->obs;
    f->n.act_space = f->act;
    f->n.policy = policy_with(OBS_DIM, 1, 0);
    f->n.nlanes = NLANES;
    f->n.lanes = calloc(NLANES, sizeof *f->n.lanes);
    assert_non_null(f->n.lanes);
    for (uint32_t i = 0; i < NLANES; i++) {
        ro_learner_t *l = &f->n.lanes[i];
        ro__actor_init(&l->actor, "lane", lane_behaviour, 8, schedule_now, NULL);
        l->swap_msg.type = RO_MSG_POLICY;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    ro__policy_free(f->n.policy);
    ro__policy_free(f->n.swap_next);
    ro__policy_free(f->n.swap_queued);
    for (uint32_t i = 0; i < f->n.nretired; i++)
        ro__policy_free(f->n.retired[i]);
    free(f->n.lanes);
    ro__layout_free(&f->n.layout);
    free(f);
    F = NULL;
    return 0;
}

/* A push asks every lane to switch to one new policy; the node takes it
 * once both have answered, and it acts as the pushed weights do. */
static void test_push_switches_every_lane(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    ro_policy_t *src = policy_with(OBS_DIM, 2, 0);
    const ro_policy_t *old = f->n.policy;
    assert_int_equal(push(f, src, 5, err, sizeof err), 0);
    assert_int_equal(f->asked[0], 1);
    assert_int_equal(f->asked[1], 1);
    const ro_policy_t *next = f->n.swap_next;
    assert_non_null(next);
    assert_ptr_equal(f->asked_to[0], next);
    assert_ptr_equal(f->asked_to[1], next);
    assert_ptr_equal(f->n.policy, old); /* not before every lane switched */
    ro__node_policy_switched(&f->n, &f->n.lanes[0]);
    assert_ptr_equal(f->n.policy, old);
    ro__node_policy_switched(&f->n, &f->n.lanes[1]);
    assert_ptr_equal(f->n.policy, next);
    assert_null(f->n.swap_next);
    assert_int_equal(f->n.policy_pushes, 1);
    assert_int_equal(ro__policy_version(f->n.policy), 5);
    /* The same weights: the same forward pass, bit for bit. */
    ro_policy_ws_t *wa, *wb;
    assert_int_equal(ro__policy_ws_new(&wa, src, 1), 0);
    assert_int_equal(ro__policy_ws_new(&wb, f->n.policy, 1), 0);
    for (uint32_t k = 0; k < OBS_DIM; k++)
        ro__policy_ws_input(wa)[k] = ro__policy_ws_input(wb)[k] = 0.25f * (float)k - 0.3f;
    float oa[4], ob[4];
    ro__policy_forward(src, wa, 1, oa, NULL);
    ro__policy_forward(f->n.policy, wb, 1, ob, NULL);
    assert_memory_equal(oa, ob, 2 * sizeof(float));
    ro__policy_ws_free(wa);
    ro__policy_ws_free(wb);
    ro__policy_free(src);
}

/* Pushes while the lanes switch wait; the newest replaces a waiting one,
 * and the lanes then go to it. */
static void test_pushes_while_switching_go_to_the_newest(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    ro_policy_t *a = policy_with(OBS_DIM, 2, 0), *b = policy_with(OBS_DIM, 3, 0),
                *c = policy_with(OBS_DIM, 4, 0);
    assert_int_equal(push(f, a, 1, err, sizeof err), 0);
    assert_int_equal(push(f, b, 2, err, sizeof err), 0);
    assert_int_equal(push(f, c, 3, err, sizeof err), 0); /* b, unused, is freed */
    assert_int_equal(f->asked[0], 1);                    /* only the first went out yet */
    assert_int_equal(ro__policy_version(f->n.swap_queued), 3);
    switched(f);
    assert_int_equal(ro__policy_version(f->n.policy), 1);
    assert_int_equal(f->asked[0], 2); /* the queued one goes out now */
    assert_int_equal(f->asked[1], 2);
    assert_int_equal(ro__policy_version(f->asked_to[0]), 3);
    switched(f);
    assert_int_equal(ro__policy_version(f->n.policy), 3);
    assert_null(f->n.swap_next);
    assert_null(f->n.swap_queued);
    assert_int_equal(f->n.policy_pushes, 2);
    ro__policy_free(a);
    ro__policy_free(b);
    ro__policy_free(c);
}

/* A lane that could not switch still runs the old policy: it is retired,
 * not freed, and the node goes on with the new one. */
static void test_failed_lane_keeps_the_old_policy_alive(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    ro_policy_t *src = policy_with(OBS_DIM, 2, 0);
    const ro_policy_t *old = f->n.policy;
    f->fail[1] = true;
    assert_int_equal(push(f, src, 9, err, sizeof err), 0);
    switched(f);
    assert_int_equal(f->n.nretired, 1);
    assert_ptr_equal(f->n.retired[0], old);
    assert_int_equal(ro__policy_version(f->n.policy), 9);
    assert_false(f->n.swap_failed); /* the next switch starts clean */
    ro__policy_free(src);
}

/* After 8 failed switches the node refuses pushes (it keeps 8 retired). */
static void test_refuses_after_eight_failed_switches(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    ro_policy_t *src = policy_with(OBS_DIM, 2, 0);
    f->fail[0] = true;
    for (int k = 0; k < 8; k++) {
        assert_int_equal(push(f, src, (uint64_t)k + 1, err, sizeof err), 0);
        switched(f);
    }
    assert_int_equal(f->n.nretired, 8);
    assert_int_equal(push(f, src, 99, err, sizeof err), RO_ENOMEM);
    assert_non_null(strstr(err, "failed to switch policies 8 times"));
    ro__policy_free(src);
}

/* Weights for other spaces, or another recurrent cell, are refused by
 * name; no lane is asked and the node's policy stays. */
static void test_refuses_other_spaces_and_cells(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    const ro_policy_t *old = f->n.policy;
    ro_policy_t *wide = policy_with(OBS_DIM + 1, 2, 0), *gru = policy_with(OBS_DIM, 2, 8);
    assert_int_not_equal(push(f, wide, 1, err, sizeof err), 0);
    assert_int_not_equal(push(f, gru, 2, err, sizeof err), 0);
    assert_non_null(strstr(err, "its recurrent cell is gru:8 but the node's is none:0"));
    assert_int_equal(f->asked[0], 0);
    assert_int_equal(f->asked[1], 0);
    assert_ptr_equal(f->n.policy, old);
    assert_null(f->n.swap_next);
    ro__policy_free(wide);
    ro__policy_free(gru);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_push_switches_every_lane, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pushes_while_switching_go_to_the_newest, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_lane_keeps_the_old_policy_alive, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refuses_after_eight_failed_switches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_other_spaces_and_cells, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
