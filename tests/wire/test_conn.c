/*
 * The one connection module (src/wire/conn.c), both ends on one loop: a
 * listener on 127.0.0.1:0, a connection made with ro__conn_connect and one
 * accepted with ro__conn_accept, frames both ways (one bigger than a read
 * chunk), goodbye and close. Then the faults: a peer sending bytes that are
 * not frames is told why and closed with `broken`; a listener off loopback
 * is refused without a token; a peer that stops reading makes
 * ro__conn_send return -ENOBUFS once over max_queued; a refused connect
 * reports and closes (test_conn_writes.c: how small frames are written,
 * and reads without the loop). Every wait is for an event
 * (loop_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "loop_fixture.h"
#include "conn_fixture.h"
#include "runtime/error.h"
#include "wire/conn.h"
#include "wire/listener.h"

#define BIG_FLOATS 50000 /* 200 KB of observations: several read chunks */

static bool got_frames_srv(void *ctx)
{
    fixture_t *t = ctx;
    return t->srv.frames >= 1;
}

static bool got_frames_cli2(void *ctx)
{
    fixture_t *t = ctx;
    return t->cli.frames >= 2;
}

static bool got_goodbye(void *ctx)
{
    fixture_t *t = ctx;
    return t->srv.frames >= 2;
}

static void test_frames_both_ways(void **state)
{
    (void)state;
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    listen_loopback(t, 64u << 20);
    struct sockaddr_storage ss = bound_addr(t);
    ro_conn_opts_t co = opts_for(&t->cli, 64u << 20);
    assert_int_equal(ro__conn_connect(&t->cli.c, &t->loop, (struct sockaddr *)&ss, &co), 0);
    loop_wait_flag(&t->loop, &t->cli.connected, "the client's on_connect with status 0");
    assert_string_equal(t->cli.c.peer, t->bound);

    /* Client -> server: a hello. */
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    h.protocol_version = RO_PROTOCOL_VERSION;
    h.role = "learner";
    h.name = "test-client";
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &h;
    assert_int_equal(ro__conn_send(&t->cli.c, &f), 0);
    loop_wait(&t->loop, got_frames_srv, t, "the hello at the server");
    assert_true(t->accepted);
    assert_int_equal(strncmp(t->srv.c.peer, "127.0.0.1:", 10), 0);
    assert_string_equal(t->srv.c.label, t->srv.c.peer);
    ro_frame_t *got = t->srv.kept[0];
    assert_int_equal(got->body_case, ROLLOUT__V1__FRAME__BODY_HELLO);
    assert_string_equal(got->hello->name, "test-client");
    assert_string_equal(got->hello->role, "learner");

    /* Server -> client: actions, then observations bigger than a read chunk. */
    int32_t acts[3] = {2, 0, 1};
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = 77;
    a.n_discrete = 3;
    a.discrete = acts;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
    f.actions = &a;
    assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
    float *big = malloc(BIG_FLOATS * sizeof(float));
    assert_non_null(big);
    for (uint32_t i = 0; i < BIG_FLOATS; i++)
        big[i] = (float)i * 0.5f;
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.seq = 78;
    o.n_obs = BIG_FLOATS;
    o.obs = big;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &o;
    assert_true(rollout__v1__frame__get_packed_size(&f) > 2 * RO_CONN_READ_CHUNK);
    assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
    loop_wait(&t->loop, got_frames_cli2, t, "the actions and observations at the client");
    assert_int_equal(t->cli.kept[0]->body_case, ROLLOUT__V1__FRAME__BODY_ACTIONS);
    assert_int_equal(t->cli.kept[0]->actions->seq, 77);
    assert_int_equal(t->cli.kept[0]->actions->n_discrete, 3);
    assert_memory_equal(t->cli.kept[0]->actions->discrete, acts, sizeof acts);
    assert_int_equal(t->cli.kept[1]->body_case, ROLLOUT__V1__FRAME__BODY_OBSERVATIONS);
    assert_int_equal(t->cli.kept[1]->observations->n_obs, BIG_FLOATS);
    assert_memory_equal(t->cli.kept[1]->observations->obs, big, BIG_FLOATS * sizeof(float));
    free(big);

    /* Goodbye, then the client closes: the server sees the peer go. */
    assert_int_equal(ro__conn_goodbye(&t->cli.c, "done here", NULL), 0);
    loop_wait(&t->loop, got_goodbye, t, "the goodbye at the server");
    assert_int_equal(t->srv.kept[1]->body_case, ROLLOUT__V1__FRAME__BODY_GOODBYE);
    assert_string_equal(t->srv.kept[1]->goodbye->reason, "done here");
    ro__conn_close(&t->cli.c, "test over");
    ro__conn_close(&t->cli.c, "twice");                     /* idempotent */
    assert_int_equal(ro__conn_send(&t->cli.c, &f), RO_EIO); /* closing: nothing sent */
    loop_wait(&t->loop, both_closed, t, "both ends' on_closed");
    assert_string_equal(t->cli.why, "test over");
    assert_string_equal(t->srv.why, "disconnected");
    assert_false(t->srv.broken || t->cli.broken);
    assert_false(t->srv.c.open || t->cli.c.open);
    assert_int_equal(ro__conn_send(&t->srv.c, &f), RO_EIO); /* closed */
    free_kept(&t->srv);
    free_kept(&t->cli);
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    free(t);
}

/* A blocking socket of the test's own, connected to the listener; recv
 * gives up after the hang guard rather than block for ever. */
static int raw_connect(fixture_t *t)
{
    struct sockaddr_storage ss = bound_addr(t);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = LOOP_HANG_GUARD_MS / 1000};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in)), 0);
    loop_wait_flag(&t->loop, &t->accepted, "the listener accepting the raw socket");
    return fd;
}

static bool srv_closed(void *ctx)
{
    return ((fixture_t *)ctx)->srv.closed;
}

/* Bytes that are not frames: the peer gets an Error frame saying why, the
 * connection closes with `broken` set, and nothing decoded is left over. */
static void test_garbage_closes_broken(void **state)
{
    (void)state;
    static const struct {
        uint8_t bytes[12];
        size_t len;
        int code;
        const char *why;
    } cases[] = {
        {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
         11,
         RO_EBADMSG,
         "malformed length prefix at byte 0"},
        {{5, 0xff, 0xff, 0xff, 0xff, 0xff},
         6,
         RO_EBADMSG,
         "frame of 5 bytes at byte 0 is not a valid Frame message"},
        {{0xff, 0xff, 0xff, 0x7f}, 4, RO_EMSGSIZE, "exceeds the limit of 1048576"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture_t *t = calloc(1, sizeof *t);
        assert_non_null(t);
        listen_loopback(t, 64u << 20);
        int fd = raw_connect(t);
        assert_int_equal(write(fd, cases[i].bytes, cases[i].len), (ssize_t)cases[i].len);
        loop_wait(&t->loop, srv_closed, t, "the server closing the connection that sent garbage");
        assert_true(t->srv.broken);
        if (!strstr(t->srv.why, cases[i].why))
            fail_msg("why \"%s\" does not say \"%s\"", t->srv.why, cases[i].why);
        assert_int_equal(t->srv.frames, 0);
        assert_int_equal(t->srv.alloc.used, 0);

        /* What the peer was told: one Error frame, then the end. */
        ro_pb_alloc_t alloc;
        ro__pb_alloc_init(&alloc, 1u << 20);
        ro_frame_reader_t r;
        assert_int_equal(ro__frame_reader_init(&r, 1u << 20, &alloc), 0);
        uint8_t buf[4096];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof buf, 0)) > 0)
            assert_int_equal(ro__frame_reader_feed(&r, buf, (size_t)n), 0);
        assert_int_equal(n, 0); /* an orderly end, not the hang guard */
        ro_frame_t *f = NULL;
        char err[ERRLEN];
        assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), 1);
        assert_int_equal(f->body_case, ROLLOUT__V1__FRAME__BODY_ERROR);
        assert_int_equal(f->error->code, (uint32_t)-cases[i].code);
        assert_non_null(strstr(f->error->message, cases[i].why));
        ro__frame_free(&alloc, f);
        assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), 0); /* nothing more */
        ro__frame_reader_free(&r);
        close(fd);
        ro__listener_close(&t->server);
        loop_finish(&t->loop);
        free(t);
    }
}

static void expect_listen_error(uv_loop_t *loop, const char *spec, bool off_loopback_ok, int code,
                                const char *needle)
{
    ro_listener_t server;
    char bound[80], err[ERRLEN] = "";
    int rc = ro__listener_open(&server, loop, spec, "--listen", off_loopback_ok, "test_conn",
                               on_connection, NULL, bound, sizeof bound, err, sizeof err);
    if (rc != code || !strstr(err, needle))
        fail_msg("listen '%s': expected %d saying \"%s\", got %d \"%s\"", spec, code, needle, rc,
                 err);
    uv_run(loop, UV_RUN_NOWAIT); /* a handle it made is closing: let it go */
}

/* Off loopback only with a token; bad specs and a taken port say why. */
static void test_listen_refusals(void **state)
{
    (void)state;
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    listen_loopback(t, 64u << 20);
    expect_listen_error(&t->loop, "0.0.0.0:0", false, RO_EINVAL,
                        "--listen '0.0.0.0:0' is not a loopback address: a --token-file is "
                        "required");
    expect_listen_error(&t->loop, "[::]:0", false, RO_EINVAL, "is not a loopback address");
    expect_listen_error(&t->loop, "192.0.2.1:0", false, RO_EINVAL, "is not a loopback address");
    expect_listen_error(&t->loop, "localhost", false, RO_EINVAL,
                        "--listen 'localhost': expected HOST:PORT");
    expect_listen_error(&t->loop, t->bound, false, RO_EIO, "address already in use");

    /* With a token, any address: the kernel's wildcard here. */
    ro_listener_t any;
    char bound[80], err[ERRLEN] = "";
    int rc = ro__listener_open(&any, &t->loop, "0.0.0.0:0", "--listen", true, "test_conn",
                               on_connection, NULL, bound, sizeof bound, err, sizeof err);
    if (rc)
        fail_msg("listen 0.0.0.0:0 with a token: %s", err);
    assert_int_equal(strncmp(bound, "0.0.0.0:", 8), 0);
    ro__listener_close(&any);
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    free(t);
}

/* A peer that never reads: the kernel's buffers fill, then the send queue;
 * once it holds over max_queued bytes, ro__conn_send says -ENOBUFS. */
static void test_slow_reader_enobufs(void **state)
{
    (void)state;
    enum { MAX_QUEUED = 256 * 1024, FLOATS = 16384, MAX_SENDS = 4096 };
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    listen_loopback(t, MAX_QUEUED);
    int fd = raw_connect(t);
    float *obs = calloc(FLOATS, sizeof(float));
    assert_non_null(obs);
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.n_obs = FLOATS;
    o.obs = obs;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &o;
    int rc = 0, sends = 0;
    /* At most MAX_SENDS x 64 KiB: far more than loopback's buffers hold. */
    while (rc == 0 && sends < MAX_SENDS) {
        o.seq = (uint64_t)++sends;
        rc = ro__conn_send(&t->srv.c, &f);
        if (rc == 0)
            assert_true(ro__conn_queued(&t->srv.c) <= MAX_QUEUED + 2 * FLOATS * sizeof(float));
    }
    if (rc != -ENOBUFS)
        fail_msg("after %d frames of %zu bytes to a peer that never reads: %d, not -ENOBUFS", sends,
                 FLOATS * sizeof(float), rc);
    assert_true(ro__conn_queued(&t->srv.c) > MAX_QUEUED);
    assert_int_equal(ro__conn_send(&t->srv.c, &f), -ENOBUFS); /* and stays so */
    print_message("-ENOBUFS after %d frames, %zu bytes queued\n", sends,
                  ro__conn_queued(&t->srv.c));
    /* Close our end first: the queued writes are cancelled, not attempted
     * against a reset socket. */
    ro__conn_close(&t->srv.c, "slow reader");
    loop_wait(&t->loop, srv_closed, t, "the slow reader's connection closing");
    assert_string_equal(t->srv.why, "slow reader");
    close(fd);
    free(obs);
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    free(t);
}

static bool cli_closed(void *ctx)
{
    return ((fixture_t *)ctx)->cli.closed;
}

/* Nobody listening: on_connect reports the error, then on_closed says why. */
static void test_connect_refused(void **state)
{
    (void)state;
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    listen_loopback(t, 64u << 20);
    struct sockaddr_storage ss = bound_addr(t); /* a port that was free ... */
    ro__listener_close(&t->server);             /* ... and is again */
    uv_run(&t->loop, UV_RUN_NOWAIT);
    ro_conn_opts_t co = opts_for(&t->cli, 64u << 20);
    assert_int_equal(ro__conn_connect(&t->cli.c, &t->loop, (struct sockaddr *)&ss, &co), 0);
    loop_wait(&t->loop, cli_closed, t, "on_closed of a connect nobody answers");
    assert_true(t->cli.connect_called);
    assert_int_equal(t->cli.connect_status, UV_ECONNREFUSED);
    assert_string_equal(t->cli.why, "cannot connect: connection refused");
    assert_false(t->cli.c.open);
    loop_finish(&t->loop);
    free(t);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the programs do: a write to a gone peer is an error */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames_both_ways), cmocka_unit_test(test_garbage_closes_broken),
        cmocka_unit_test(test_listen_refusals),  cmocka_unit_test(test_slow_reader_enobufs),
        cmocka_unit_test(test_connect_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
