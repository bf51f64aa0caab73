/*
 * A learner's GetState and SetState at the hub (actors/hub/hub_env_state.c),
 * on a real loop with fake shards (fixtures/hub_fixture.h) whose state ports
 * count what the hub asks of them: states of held envs only, every blob
 * checked before any is loaded, refusals answered with the connection kept,
 * protocol errors closing only that learner. Nothing depends on time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <string.h>

#include "actors/exchange/state_port.h"
#include "hub_fixture.h"

#define BLOB 8

/* A shard's fake port: env e's blob is {e, 0xA5 x 7}. */
typedef struct fake_port {
    ro_state_port_t port;
    uint32_t first;
    uint32_t saves, checks, loads;
    uint32_t loaded[PER_SHARD];
} fake_port_t;

static int fake_bytes(ro_state_port_t *p, uint32_t j, size_t *out, char *err, size_t errlen)
{
    (void)p, (void)j, (void)err, (void)errlen;
    *out = BLOB;
    return 0;
}

static int fake_save(ro_state_port_t *p, uint32_t j, void *buf, size_t cap, size_t *len, char *err,
                     size_t errlen)
{
    fake_port_t *f = (fake_port_t *)p;
    assert_true(j < PER_SHARD && cap >= BLOB);
    (void)err, (void)errlen;
    memset(buf, 0xA5, BLOB);
    ((uint8_t *)buf)[0] = (uint8_t)(f->first + j);
    *len = BLOB;
    f->saves++;
    return 0;
}

static int fake_check(ro_state_port_t *p, uint32_t j, const void *blob, size_t len, char *err,
                      size_t errlen)
{
    fake_port_t *f = (fake_port_t *)p;
    const uint8_t *b = blob;
    f->checks++;
    if (len != BLOB || b[0] != f->first + j || b[1] != 0xA5)
        return ro__errorf(err, errlen, RO_EBADMSG, "fake: not a state of env %u", f->first + j);
    return 0;
}

static int fake_load(ro_state_port_t *p, uint32_t j, const void *blob, size_t len, char *err,
                     size_t errlen)
{
    fake_port_t *f = (fake_port_t *)p;
    int rc = fake_check(p, j, blob, len, err, errlen);
    if (rc == 0 && ((const uint8_t *)blob)[2] == 0xEE) /* the env refuses what passed */
        return ro__errorf(err, errlen, RO_EINVAL, "fake: env %u refused the state's bytes",
                          f->first + j);
    if (rc == 0) {
        f->loads++;
        f->loaded[j]++;
    }
    return rc;
}

static bool got_states(void *ctx)
{
    return ((learner_t *)ctx)->states != NULL;
}

/* ask sends a get_state (states NULL) or set_state of envs and waits for
 * the answer, which the caller frees. */
static ro_frame_t *ask(hub_test_t *t, learner_t *L, const uint32_t *env, size_t n,
                       ProtobufCBinaryData *states)
{
    Rollout__V1__GetState g = ROLLOUT__V1__GET_STATE__INIT;
    Rollout__V1__SetState s = ROLLOUT__V1__SET_STATE__INIT;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    if (states) {
        s.n_env = s.n_state = n;
        s.env = (uint32_t *)env;
        s.state = states;
        f.body_case = ROLLOUT__V1__FRAME__BODY_SET_STATE;
        f.set_state = &s;
    } else {
        g.n_env = n;
        g.env = (uint32_t *)env;
        f.body_case = ROLLOUT__V1__FRAME__BODY_GET_STATE;
        f.get_state = &g;
    }
    learner_send(L, &f);
    loop_wait(&t->loop, got_states, L, "the hub's env_states answer");
    ro_frame_t *a = L->states;
    L->states = NULL;
    return a;
}

static void expect_answer(learner_t *L, ro_frame_t *a, uint32_t code, const char *words)
{
    const Rollout__V1__EnvStates *e = a->env_states;
    assert_int_equal(e->code, code);
    if (words && (!e->error || !strstr(e->error, words)))
        fail_msg("'%s' does not say '%s'", e->error ? e->error : "", words);
    ro__frame_free(&L->alloc, a);
}

static void test_get_and_set_states(void **state)
{
    (void)state;
    hub_test_t *t = hub_test_new();
    fake_port_t ports[SHARDS - 1]; /* the last shard offers none */
    for (uint32_t i = 0; i < SHARDS - 1; i++) {
        ports[i] = (fake_port_t){.port = {fake_bytes, fake_save, fake_check, fake_load},
                                 .first = i * PER_SHARD};
        t->b[i].state = &ports[i].port;
    }
    offer_all(t, RO_MSG_OBS_READY);
    learner_t *L = learner_connect(t, "one", GOOD);
    wait_rows(t, L, NUM_ENVS, "observations of all 6 envs: the learner holds them all");

    /* The states of held envs, in the request's order. */
    ro_frame_t *a = ask(t, L, (const uint32_t[]){3, 0}, 2, NULL);
    const Rollout__V1__EnvStates *e = a->env_states;
    assert_int_equal(e->code, 0);
    assert_int_equal(e->n_env, 2);
    assert_int_equal(e->env[0], 3);
    assert_int_equal(e->env[1], 0);
    assert_int_equal(e->n_state, 2);
    uint8_t blob[2][BLOB];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(e->state[k].len, BLOB);
        assert_int_equal(e->state[k].data[0], e->env[k]);
        memcpy(blob[k], e->state[k].data, BLOB);
    }
    ro__frame_free(&L->alloc, a);
    assert_int_equal(ports[0].saves + ports[1].saves, 2);

    /* A shard without a port: refused by name, nothing saved. */
    expect_answer(L, ask(t, L, (const uint32_t[]){1, 5}, 2, NULL), 95,
                  "env 5: this node's envs "
                  "keep no state");
    assert_int_equal(ports[0].saves + ports[1].saves, 2);

    /* One bad blob: every blob is checked, none is loaded. */
    uint8_t bad[BLOB];
    memcpy(bad, blob[1], BLOB);
    bad[1] = 0;
    ProtobufCBinaryData st[2] = {{BLOB, blob[0]}, {BLOB, bad}};
    expect_answer(L, ask(t, L, (const uint32_t[]){3, 0}, 2, st), 74, "fake: not a state of env 0");
    assert_int_equal(ports[0].loads + ports[1].loads, 0);

    /* Good blobs: each env loaded once. */
    st[1].data = blob[1];
    expect_answer(L, ask(t, L, (const uint32_t[]){3, 0}, 2, st), 0, NULL);
    assert_int_equal(ports[0].loaded[0], 1);
    assert_int_equal(ports[1].loaded[1], 1);
    assert_int_equal(ports[0].loads + ports[1].loads, 2);

    /* An env that refuses bytes that passed the checks: named, and the
     * others of the request are still loaded. */
    uint8_t refused[BLOB];
    memcpy(refused, blob[0], BLOB);
    refused[2] = 0xEE;
    st[0].data = refused;
    expect_answer(L, ask(t, L, (const uint32_t[]){3, 0}, 2, st), 22,
                  "fake: env 3 refused the state's bytes");
    assert_int_equal(ports[0].loaded[0], 2);
    assert_int_equal(ports[1].loaded[1], 1);

    /* Answered envs step (the fake env actor keeps them): not the learner's now. */
    learner_answer(L, false);
    want_t replies = {.t = t, .n = SHARDS};
    loop_wait(&t->loop, replies_at_least, &replies, "the answered envs at their shards");
    expect_answer(L, ask(t, L, (const uint32_t[]){2}, 1, NULL), 22,
                  "env 2 is not awaiting this learner's answer");
    ro_hub_stats_t hs;
    hub_stats(t, &hs);
    assert_int_equal(hs.rejected, 0); /* refusals keep the connection */

    /* An env named twice breaks the protocol: an error frame, closed. */
    Rollout__V1__GetState g = ROLLOUT__V1__GET_STATE__INIT;
    g.n_env = 2;
    g.env = (uint32_t[]){1, 1};
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GET_STATE;
    f.get_state = &g;
    learner_send(L, &f);
    loop_wait(&t->loop, learner_closed, L, "the hub closing the learner that named env 1 twice");
    assert_true(L->got_error);
    assert_int_equal(L->error_code, 71);
    assert_non_null(strstr(L->error_msg, "get_state: env 1 is named twice"));
    hub_stats(t, &hs);
    assert_int_equal(hs.rejected, 1);
    learner_close_and_free(t, L);
    for (uint32_t i = 0; i < SHARDS; i++)
        t->b[i].state = NULL;
    hub_test_free(t);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_and_set_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
