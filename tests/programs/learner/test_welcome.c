/*
 * rollout-learner's welcomes (programs/learner/welcome.c), SEED nodes
 * without shared memory: an env ABI 1 node's spaces are adapted to a
 * layout (one float32 tensor "obs", one action part), the policy built for
 * them and the per-env state allocated; a second node must have the same
 * spaces, and a node that comes back the same envs; an env ABI 2 node's
 * layout is adopted as it is; a welcome of another protocol version or no
 * envs is refused by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "learner/learner.h"
#include "runtime/error.h"
#include "trajectory/abi2_format.h"
#include "wire/frame.h"

#define ERRLEN 256

typedef struct fixture {
    learner_t *L;
    node_t *n[2];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->L = calloc(1, sizeof *f->L);
    assert_non_null(f->L);
    ro_policy_spec_t *s = &f->L->cfg.policy;
    s->kind = RO_POLICY_MLP;
    s->nhidden = 1;
    s->hidden[0] = 8;
    s->activation = RO_ACT_TANH;
    s->seed = 3;
    for (int i = 0; i < 2; i++) {
        f->n[i] = calloc(1, sizeof *f->n[i]);
        assert_non_null(f->n[i]);
        f->n[i]->link.o.index = (uint32_t)i;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 2; i++) {
        free(f->n[i]->rngs);
        free(f->n[i]->ep_ret);
        free(f->n[i]->next_step);
        free(f->n[i]);
    }
    ro__policy_free(f->L->policy);
    ro__layout_free(&f->L->lay);
    for (int k = 0; k < 4; k++)
        free(f->L->bounds[k]);
    free(f->L);
    free(f);
    return 0;
}

/* welcome_abi1: node n's SEED welcome of num_envs envs of obs_dim floats
 * and Discrete(nact) actions, taken by the learner. */
static int welcome_abi1(fixture_t *f, int n, uint32_t num_envs, uint32_t obs_dim, uint32_t nact,
                        char *err)
{
    float low[8], high[8];
    for (uint32_t k = 0; k < 8; k++)
        low[k] = -1.0f, high[k] = 1.0f;
    const ro_space_t os = {
        .kind = RO_SPACE_BOX, .ndim = 1, .shape = {obs_dim}, .low = low, .high = high};
    const ro_space_t as = {.kind = RO_SPACE_DISCRETE, .n = nact};
    Rollout__V1__Space o = ROLLOUT__V1__SPACE__INIT, a = ROLLOUT__V1__SPACE__INIT;
    uint32_t oshape[RO_SPACE_MAX_DIMS], ashape[RO_SPACE_MAX_DIMS];
    ro__wire_space(&o, &os, oshape);
    ro__wire_space(&a, &as, ashape);
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    spec.env = "t";
    spec.observation = &o;
    spec.action = &a;
    spec.num_envs = num_envs;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = RO_PROTOCOL_VERSION;
    w.spec = &spec;
    bool misfit = false;
    int rc = ro__learner_welcome(f->L, f->n[n], &w, &misfit, err, ERRLEN);
    assert_false(misfit);
    return rc;
}

/* An ABI 1 node: its spaces adapted to a layout that every path past the
 * welcome reads, the policy built, each env's state allocated. */
static void test_abi1_spaces_adapted(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    assert_int_equal(welcome_abi1(f, 0, 5, 4, 3, err), 0);
    const learner_t *L = f->L;
    assert_false(L->abi2); /* its frames stay ABI 1's */
    assert_true(L->have_spec);
    assert_true(L->lay.abi1);
    assert_int_equal(L->lay.ntensors, 1);
    assert_int_equal(L->lay.t[0].dtype, RO_DTYPE_FLOAT32);
    assert_int_equal(L->lay.obs_width, 4);
    assert_int_equal(L->lay.agents, 1);
    assert_int_equal(L->lay.ndisc, 1);
    assert_int_equal(L->lay.nbox, 0);
    assert_int_equal(L->lay.mask_width, 0);
    assert_int_equal(L->obs_dim, 4);
    assert_int_equal(L->act_ndisc, 1);
    assert_non_null(L->policy);
    assert_int_equal(ro__policy_obs_dim(L->policy), 4);
    assert_int_equal(f->n[0]->num_envs, 5);
    assert_non_null(f->n[0]->rngs);
    assert_non_null(f->n[0]->next_step);
}

/* A second node must have the first one's spaces; a node that comes back
 * must have its envs. */
static void test_later_welcomes_must_match(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    assert_int_equal(welcome_abi1(f, 0, 5, 4, 3, err), 0);
    assert_int_equal(welcome_abi1(f, 1, 2, 5, 3, err), RO_EPROTO);
    assert_non_null(strstr(err, "its env spaces differ from the first node's"));
    assert_int_equal(welcome_abi1(f, 1, 2, 4, 2, err), RO_EPROTO);
    assert_int_equal(welcome_abi1(f, 1, 2, 4, 3, err), 0);
    assert_int_equal(f->n[1]->num_envs, 2);
    f->n[0]->link.attached = true; /* node 0 reconnects */
    assert_int_equal(welcome_abi1(f, 0, 6, 4, 3, err), RO_EPROTO);
    assert_non_null(strstr(err, "came back with 6 envs, had 5"));
    assert_int_equal(welcome_abi1(f, 0, 5, 4, 3, err), 0);
}

/* An env ABI 2 node's layout (2 agents, a uint8 tensor, a masked
 * Discrete(3)) adopted as it is: rows are envs x agents. */
static void test_abi2_layout_adopted(void **state)
{
    fixture_t *f = *state;
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = 2;
    sp.num_obs = 1;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 1, .shape = {2}};
    sp.num_parts = 1;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    sp.action_mask = 1;
    ro_space_layout_t lay;
    ro_traj_layout_msg_t lm;
    char err[ERRLEN];
    assert_int_equal(ro__layout_from_spaces(&lay, &sp, "t", err, sizeof err), 0);
    assert_int_equal(ro__traj_layout_msg_init(&lm, &lay), 0);
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    spec.env = "t";
    spec.num_envs = 3;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = RO_PROTOCOL_VERSION;
    w.spec = &spec;
    w.layout = &lm.msg;
    w.mode = "seed";
    bool misfit = false;
    assert_int_equal(ro__learner_welcome(f->L, f->n[0], &w, &misfit, err, sizeof err), 0);
    assert_true(f->L->abi2);
    assert_int_equal(f->L->lay.agents, 2);
    assert_int_equal(f->L->lay.mask_width, 3);
    assert_int_equal(f->L->act_ndisc, 1);
    assert_int_equal(f->n[0]->num_envs, 6); /* rows */
    /* An ABI 1 node after it: not the same env. */
    assert_int_equal(welcome_abi1(f, 1, 3, 2, 3, err), RO_EPROTO);
    ro__traj_layout_msg_free(&lm);
    ro__layout_free(&lay);
}

/* Another protocol version, or no envs: refused by name. */
static void test_bad_welcomes_refused(void **state)
{
    fixture_t *f = *state;
    char err[ERRLEN];
    assert_int_equal(welcome_abi1(f, 0, 0, 4, 3, err), RO_EPROTO);
    assert_non_null(strstr(err, "num_envs 0 outside"));
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = RO_PROTOCOL_VERSION + 1;
    bool misfit = false;
    assert_int_equal(ro__learner_welcome(f->L, f->n[0], &w, &misfit, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "protocol version"));
    assert_false(f->L->have_spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_abi1_spaces_adapted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_later_welcomes_must_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abi2_layout_adopted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_welcomes_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
