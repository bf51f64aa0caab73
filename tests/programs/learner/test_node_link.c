/*
 * rollout-learner's link to one node (programs/learner/node_link.c),
 * against a node the test plays on the same loop: a listener on
 * 127.0.0.1:0 whose accepted connections answer as the test says. The
 * hello carries the link's role, token, name and protocol version, and
 * asks for no memory over TCP; a welcome reaches on_welcome, later frames
 * on_frame, and the node's goodbye (with its steps) ends the link for good.
 * A welcome the learner refuses, a frame before the welcome, an upgrade
 * not asked for: the node gets an Error frame naming it and the link is
 * over, failed. A first connection refused by the node is final even with
 * reconnects allowed; a welcomed link timed out by the node (ETIMEDOUT)
 * reconnects (a second connection, a new node id counted) and
 * ro__link_stop says goodbye with the reason. A bad address is refused at
 * start naming --connect. Every wait is for a frame or a close
 * (loop_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learner/node_link.h"
#include "loop_fixture.h"
#include "runtime/error.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "wire/listener.h"

#define ERRLEN 256
#define MAX_CONNS 2
#define MAX_SEEN 4

/* The node's side of one accepted connection: the frames it got. */
typedef struct node_end {
    ro_conn_t c;
    ro_frame_t *seen[MAX_SEEN];
    uint32_t frames;
    bool closed;
} node_end_t;

typedef struct fixture {
    uv_loop_t loop;
    ro_listener_t server;
    char bound[80];
    ro_pb_alloc_t node_alloc;
    node_end_t ends[MAX_CONNS];
    uint32_t accepted;
    ro_link_t link;
    bool started;
    /* What the learner's side saw through ro_link_ops_t. */
    uint32_t welcomes, frames, downs;
    uint64_t welcome_node_id;
    Rollout__V1__Frame__BodyCase last_frame;
    bool refuse_welcome;
} fixture_t;

static void node_on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    node_end_t *e = c->o.owner;
    if (e->frames < MAX_SEEN) {
        e->seen[e->frames] = f;
        *keep = true;
    }
    e->frames++;
}

static void node_on_closed(ro_conn_t *c)
{
    node_end_t *e = c->o.owner;
    assert_false(e->closed);
    e->closed = true;
}

static const ro_conn_ops_t node_ops = {.on_frame = node_on_frame, .on_closed = node_on_closed};

static void on_connection(ro_listener_t *l, int fd)
{
    fixture_t *t = l->data;
    assert_true(t->accepted < MAX_CONNS);
    node_end_t *e = &t->ends[t->accepted++];
    ro_conn_opts_t o = {
        .ops = &node_ops,
        .owner = e,
        .program = "test_node_link",
        .max_frame = 1u << 20,
        .max_queued = 16u << 20,
        .alloc = &t->node_alloc,
    };
    assert_int_equal(ro__conn_accept(&e->c, &t->loop, fd, &o), 0);
}

/* The learner's callbacks. */
static int on_welcome(ro_link_t *l, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    fixture_t *t = l->o.owner;
    t->welcomes++;
    t->welcome_node_id = w->node_id;
    if (t->refuse_welcome)
        return ro__errorf(err, errlen, RO_EPROTO, "the node's layout is not the first node's");
    return 0;
}

static void on_frame(ro_link_t *l, ro_frame_t *f, bool *keep)
{
    fixture_t *t = l->o.owner;
    t->frames++;
    t->last_frame = f->body_case;
    *keep = false;
}

static void on_down(ro_link_t *l)
{
    fixture_t *t = l->o.owner;
    t->downs++;
}

static const ro_link_ops_t link_ops = {
    .on_welcome = on_welcome, .on_frame = on_frame, .on_down = on_down};

static int setup(void **state)
{
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_int_equal(uv_loop_init(&t->loop), 0);
    ro__pb_alloc_init(&t->node_alloc, 16u << 20);
    char err[ERRLEN] = "";
    if (ro__listener_open(&t->server, &t->loop, "127.0.0.1:0", "--listen", false, "test_node_link",
                          on_connection, t, t->bound, sizeof t->bound, err, sizeof err) != 0)
        fail_msg("listen: %s", err);
    *state = t;
    return 0;
}

static bool node_ends_closed(void *ctx)
{
    const fixture_t *t = ctx;
    for (uint32_t i = 0; i < t->accepted; i++)
        if (!t->ends[i].closed)
            return false;
    return true;
}

static int teardown(void **state)
{
    fixture_t *t = *state;
    for (uint32_t i = 0; i < t->accepted; i++)
        if (t->ends[i].c.open)
            ro__conn_close(&t->ends[i].c, "test over");
    loop_wait(&t->loop, node_ends_closed, t, "the node's connections closed");
    if (t->started)
        ro__link_release(&t->link);
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    for (uint32_t i = 0; i < t->accepted; i++)
        for (uint32_t k = 0; k < t->ends[i].frames && k < MAX_SEEN; k++)
            ro__frame_free(&t->node_alloc, t->ends[i].seen[k]);
    assert_int_equal(t->node_alloc.used, 0);
    free(t);
    return 0;
}

/* start_link connects a link (role learner, token "tok") to the test's
 * node, reconnecting for reconnect_s. */
static void start_link(fixture_t *t, double reconnect_s)
{
    ro_link_opts_t o = {
        .ops = &link_ops,
        .owner = t,
        .addr = t->bound,
        .role = "learner",
        .token = "tok",
        .name = "test-learner",
        .max_frame = 1u << 20,
        .reconnect_s = reconnect_s,
        .quiet = true,
    };
    char err[ERRLEN] = "";
    if (ro__link_start(&t->link, &t->loop, &o, err, sizeof err) != 0)
        fail_msg("ro__link_start: %s", err);
    t->started = true;
}

typedef struct want_frames {
    const fixture_t *t;
    uint32_t i, n;
} want_frames_t;

static bool has_frames(void *ctx)
{
    const want_frames_t *w = ctx;
    return w->t->accepted > w->i && w->t->ends[w->i].frames >= w->n;
}

/* wait_node_frames waits until connection i of the node got n frames and
 * returns the n-th. */
static const ro_frame_t *wait_node_frames(fixture_t *t, uint32_t i, uint32_t n, const char *what)
{
    want_frames_t w = {t, i, n};
    loop_wait(&t->loop, has_frames, &w, what);
    return t->ends[i].seen[n - 1];
}

static void node_send(fixture_t *t, uint32_t i, ro_frame_t *f)
{
    assert_int_equal(ro__conn_send(&t->ends[i].c, f), 0);
}

static void node_welcome(fixture_t *t, uint32_t i, uint64_t node_id)
{
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    spec.env = "CartPole";
    spec.num_envs = 4;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = RO_PROTOCOL_VERSION;
    w.node_id = node_id;
    w.spec = &spec;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_WELCOME;
    f.welcome = &w;
    node_send(t, i, &f);
}

static void node_error(fixture_t *t, uint32_t i, uint32_t code, char *message)
{
    Rollout__V1__Error e = ROLLOUT__V1__ERROR__INIT;
    e.code = code;
    e.message = message;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ERROR;
    f.error = &e;
    node_send(t, i, &f);
}

static bool link_done(void *ctx)
{
    const fixture_t *t = ctx;
    return t->link.done;
}

static bool link_welcomed(void *ctx)
{
    const fixture_t *t = ctx;
    return t->link.welcomed;
}

/* The node's error frame to the learner (frame n of connection 0) names
 * what the link refused; the link is over, failed, on_down once. */
static void check_failed_with(fixture_t *t, uint32_t n, const char *want)
{
    const ro_frame_t *f = wait_node_frames(t, 0, n, "the learner's error frame at the node");
    assert_int_equal(f->body_case, ROLLOUT__V1__FRAME__BODY_ERROR);
    assert_int_equal(f->error->code, EPROTO);
    assert_non_null(strstr(f->error->message, want));
    loop_wait(&t->loop, link_done, t, "the link over");
    assert_true(t->link.failed);
    assert_true(t->link.final);
    assert_int_equal(t->downs, 1);
    assert_non_null(strstr(t->link.why, want));
}

/* The hello says who we are; a welcome, a frame, then the node's goodbye
 * with its steps: the link is over, not failed, no reconnect. */
static void test_hello_welcome_goodbye(void **state)
{
    fixture_t *t = *state;
    start_link(t, 60.0);
    const ro_frame_t *h = wait_node_frames(t, 0, 1, "the link's hello at the node");
    assert_int_equal(h->body_case, ROLLOUT__V1__FRAME__BODY_HELLO);
    assert_int_equal(h->hello->protocol_version, RO_PROTOCOL_VERSION);
    assert_string_equal(h->hello->role, "learner");
    assert_string_equal(h->hello->token, "tok");
    assert_string_equal(h->hello->name, "test-learner");
    assert_false(h->hello->shared_memory); /* TCP: no memory to map */
    assert_false(h->hello->seed_memory);
    assert_false(h->hello->upgrade); /* not asked for */
    assert_int_equal(t->link.gen, 1);

    node_welcome(t, 0, 0xabcdef);
    loop_wait(&t->loop, link_welcomed, t, "the welcome at the link");
    assert_int_equal(t->welcomes, 1);
    assert_int_equal(t->welcome_node_id, 0xabcdef);
    assert_true(t->link.attached);
    assert_int_equal(t->link.node_id, 0xabcdef);

    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.seq = 1;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &o;
    node_send(t, 0, &f);
    assert_int_equal(ro__conn_goodbye(&t->ends[0].c, "done", &(uint64_t){77}), 0);
    loop_wait(&t->loop, link_done, t, "the link over after the node's goodbye");
    assert_int_equal(t->frames, 1);
    assert_int_equal(t->last_frame, ROLLOUT__V1__FRAME__BODY_OBSERVATIONS);
    assert_true(t->link.has_goodbye_steps);
    assert_int_equal(t->link.goodbye_steps, 77);
    assert_false(t->link.failed);
    assert_true(t->link.final);
    assert_int_equal(t->downs, 1);
    assert_string_equal(t->link.why, "node said goodbye");
    assert_int_equal(t->accepted, 1); /* no reconnect */
}

/* A welcome the learner refuses: the node is told why. */
static void test_welcome_refused(void **state)
{
    fixture_t *t = *state;
    t->refuse_welcome = true;
    start_link(t, 60.0);
    wait_node_frames(t, 0, 1, "the link's hello at the node");
    node_welcome(t, 0, 1);
    check_failed_with(t, 2, "the node's layout is not the first node's");
    assert_false(t->link.attached);
}

/* A frame before the welcome: the node is told what was expected. */
static void test_frame_before_welcome(void **state)
{
    fixture_t *t = *state;
    start_link(t, 60.0);
    wait_node_frames(t, 0, 1, "the link's hello at the node");
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &o;
    node_send(t, 0, &f);
    check_failed_with(t, 2, "expected welcome, got observations");
    assert_int_equal(t->welcomes, 0);
}

/* An upgrade the hello did not ask for is a protocol error. */
static void test_upgrade_not_asked(void **state)
{
    fixture_t *t = *state;
    start_link(t, 60.0);
    wait_node_frames(t, 0, 1, "the link's hello at the node");
    uint8_t nonce[16] = {1};
    Rollout__V1__Upgrade u = ROLLOUT__V1__UPGRADE__INIT;
    u.path = "/tmp/ro_test_node_link.sock";
    u.nonce.data = nonce;
    u.nonce.len = sizeof nonce;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_UPGRADE;
    f.upgrade = &u;
    node_send(t, 0, &f);
    check_failed_with(t, 2, "an upgrade we did not ask for");
}

/* A node that refuses the first connection: over, failed, even with
 * reconnects allowed (they follow a welcome only). */
static void test_first_refusal_is_final(void **state)
{
    fixture_t *t = *state;
    start_link(t, 60.0);
    wait_node_frames(t, 0, 1, "the link's hello at the node");
    node_error(t, 0, EBUSY, "too many connections");
    loop_wait(&t->loop, link_done, t, "the link over after the refusal");
    assert_true(t->link.failed);
    assert_string_equal(t->link.why, "refused us: too many connections");
    assert_int_equal(t->downs, 1);
    assert_int_equal(t->accepted, 1);
}

typedef struct down_count {
    fixture_t *t;
    uint32_t n;
} down_count_t;

static bool downs_reached(void *ctx)
{
    const down_count_t *d = ctx;
    return d->t->downs >= d->n;
}

static bool welcomes_two(void *ctx)
{
    const fixture_t *t = ctx;
    return t->welcomes >= 2 && t->link.welcomed;
}

/* The node timed the learner out: the link is down, not over; the next
 * connection is welcomed by a restarted node (a new id), counted as a
 * reconnect; ro__link_stop then says goodbye with the reason. */
static void test_timeout_reconnects(void **state)
{
    fixture_t *t = *state;
    start_link(t, 60.0);
    wait_node_frames(t, 0, 1, "the link's hello at the node");
    node_welcome(t, 0, 5);
    loop_wait(&t->loop, link_welcomed, t, "the first welcome at the link");
    node_error(t, 0, ETIMEDOUT, "no answer within 10 s");
    down_count_t d = {t, 1};
    loop_wait(&t->loop, downs_reached, &d, "on_down after the node's timeout");
    assert_false(t->link.done);
    assert_false(t->link.failed);
    assert_true(t->link.waiting); /* a retry armed */
    const ro_frame_t *h = wait_node_frames(t, 1, 1, "the second connection's hello");
    assert_int_equal(h->body_case, ROLLOUT__V1__FRAME__BODY_HELLO);
    assert_int_equal(t->link.gen, 2);
    node_welcome(t, 1, 6);
    loop_wait(&t->loop, welcomes_two, t, "the second welcome at the link");
    assert_int_equal(t->link.reconnects, 1);
    assert_int_equal(t->link.node_id, 6);

    ro__link_stop(&t->link, "learner stopping");
    const ro_frame_t *g = wait_node_frames(t, 1, 2, "the learner's goodbye at the node");
    assert_int_equal(g->body_case, ROLLOUT__V1__FRAME__BODY_GOODBYE);
    assert_string_equal(g->goodbye->reason, "learner stopping");
    loop_wait(&t->loop, link_done, t, "the link over after ro__link_stop");
    assert_false(t->link.failed);
    assert_int_equal(t->downs, 2);
}

/* An address without a port is refused before anything starts. */
static void test_bad_address(void **state)
{
    fixture_t *t = *state;
    ro_link_opts_t o = {
        .ops = &link_ops, .owner = t, .addr = "no-port-here", .role = "learner", .token = ""};
    char err[ERRLEN] = "";
    assert_int_equal(ro__link_start(&t->link, &t->loop, &o, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "--connect"));
    assert_int_equal(t->downs, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hello_welcome_goodbye, setup, teardown),
        cmocka_unit_test_setup_teardown(test_welcome_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frame_before_welcome, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_not_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_refusal_is_final, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_reconnects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_address, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
