/*
 * The one connection module (src/wire/conn.c), both ends on one loop: a
 * listener on 127.0.0.1:0, a connection made with ro__conn_connect and one
 * accepted with ro__conn_accept, frames both ways (one bigger than a read
 * chunk), goodbye and close. Then the faults: a peer sending bytes that are
 * not frames is told why and closed with `broken`; a listener off loopback
 * is refused without a token; a peer that stops reading makes
 * ro__conn_send return -ENOBUFS once over max_queued; a refused connect
 * reports and closes. Small frames written at once, cut short (a
 * wrapped uv_try_write) or queued behind full buffers arrive whole and in
 * order; ro__conn_read_now reads
 * without the loop. Every wait is for an event (loop_fixture.h).
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
#include "runtime/error.h"
#include "wire/conn.h"
#include "wire/listener.h"

#define ERRLEN 512
#define BIG_FLOATS 50000 /* 200 KB of observations: several read chunks */

/* One end: what it saw, in order. */
typedef struct end {
    ro_conn_t c;
    ro_pb_alloc_t alloc;
    uint32_t frames;
    /* test_order_through_full_buffers: every frame's seq one after the
     * last, its content the seq's own (numbered below); the first one
     * that is not. */
    bool numbered;
    uint64_t last_seq;
    char disorder[160];
    ro_frame_t *kept[4]; /* frames kept past on_frame (keep = true) */
    int connect_status;
    bool connected, connect_called, closed;
    bool broken;
    char why[256];
} end_t;

typedef struct fixture {
    uv_loop_t loop;
    ro_listener_t server;
    char bound[80];
    end_t srv, cli;
    size_t srv_max_queued;
    bool accepted;
} fixture_t;

/* uv_try_write, wrapped at link time (tests/wire/meson.build): while
 * short_writes is set, a write takes only the first half of its bytes, as
 * a socket buffer with that much room left would. */
int __real_uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned nbufs);
int __wrap_uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned nbufs);
static bool short_writes;
static unsigned short_written;

int __wrap_uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned nbufs)
{
    if (!short_writes || nbufs != 1 || bufs[0].len < 2)
        return __real_uv_try_write(h, bufs, nbufs);
    const uv_buf_t half = uv_buf_init(bufs[0].base, bufs[0].len / 2);
    const int n = __real_uv_try_write(h, &half, 1);
    short_written += n > 0;
    return n;
}

#define NUM_DISCRETE 100 /* a numbered Actions frame: about 450 bytes, sent directly */
#define NUM_FLOATS 16384 /* a numbered Observations frame: 64 KiB, always queued */

/* Frame seq of a numbered run: Actions with NUM_DISCRETE entries, every
 * eighth one Observations of NUM_FLOATS floats; each value from seq. */
static void numbered_frame(uint64_t seq, ro_frame_t *f, Rollout__V1__Actions *a, int32_t *acts,
                           Rollout__V1__Observations *o, float *obs)
{
    *f = (ro_frame_t)ROLLOUT__V1__FRAME__INIT;
    if (seq % 8 == 0) {
        *o = (Rollout__V1__Observations)ROLLOUT__V1__OBSERVATIONS__INIT;
        o->seq = seq;
        o->n_obs = NUM_FLOATS;
        o->obs = obs;
        for (uint32_t k = 0; k < NUM_FLOATS; k++)
            obs[k] = (float)(seq * 7 + k);
        f->body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
        f->observations = o;
        return;
    }
    *a = (Rollout__V1__Actions)ROLLOUT__V1__ACTIONS__INIT;
    a->seq = seq;
    a->n_discrete = NUM_DISCRETE;
    a->discrete = acts;
    for (uint32_t k = 0; k < NUM_DISCRETE; k++)
        acts[k] = (int32_t)(seq * 31 + k);
    f->body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
    f->actions = a;
}

/* Whether a received frame is numbered_frame(seq) for the next seq; the
 * first difference goes into e->disorder. */
static void check_numbered(end_t *e, const ro_frame_t *f)
{
    const uint64_t seq = e->last_seq + 1;
    bool ok;
    if (seq % 8 == 0) {
        const Rollout__V1__Observations *o = f->observations;
        ok = f->body_case == ROLLOUT__V1__FRAME__BODY_OBSERVATIONS && o->seq == seq &&
             o->n_obs == NUM_FLOATS;
        for (uint32_t k = 0; ok && k < NUM_FLOATS; k++)
            ok = o->obs[k] == (float)(seq * 7 + k);
    } else {
        const Rollout__V1__Actions *a = f->actions;
        ok = f->body_case == ROLLOUT__V1__FRAME__BODY_ACTIONS && a->seq == seq &&
             a->n_discrete == NUM_DISCRETE;
        for (uint32_t k = 0; ok && k < NUM_DISCRETE; k++)
            ok = a->discrete[k] == (int32_t)(seq * 31 + k);
    }
    if (!ok && !e->disorder[0])
        snprintf(e->disorder, sizeof e->disorder, "frame %u is not numbered frame %llu",
                 e->frames + 1, (unsigned long long)seq);
    e->last_seq = seq;
}

static void on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    end_t *e = c->owner;
    if (e->numbered) {
        check_numbered(e, f);
        e->frames++;
        return;
    }
    if (e->frames < 4) {
        e->kept[e->frames] = f;
        *keep = true;
    }
    e->frames++;
}

static void on_connect(ro_conn_t *c, int status)
{
    end_t *e = c->owner;
    assert_false(e->connect_called); /* once */
    e->connect_called = true;
    e->connect_status = status;
    e->connected = status == 0;
}

static void on_closed(ro_conn_t *c)
{
    end_t *e = c->owner;
    assert_false(e->closed); /* exactly once */
    e->closed = true;
    e->broken = c->broken;
    snprintf(e->why, sizeof e->why, "%s", c->why);
}

static const ro_conn_ops_t ops = {
    .on_frame = on_frame,
    .on_connect = on_connect,
    .on_closed = on_closed,
};

static ro_conn_opts_t opts_for(end_t *e, size_t max_queued)
{
    ro__pb_alloc_init(&e->alloc, 64u << 20);
    return (ro_conn_opts_t){
        .ops = &ops,
        .owner = e,
        .program = "test_conn",
        .max_frame = 1u << 20,
        .max_queued = max_queued,
        .alloc = &e->alloc,
    };
}

static void on_connection(ro_listener_t *l, int fd)
{
    fixture_t *t = l->data;
    assert_false(t->accepted); /* one connection per test */
    ro_conn_opts_t o = opts_for(&t->srv, t->srv_max_queued);
    assert_int_equal(ro__conn_accept(&t->srv.c, &t->loop, fd, &o), 0);
    t->accepted = true;
}

static void listen_loopback(fixture_t *t, size_t srv_max_queued)
{
    memset(t, 0, sizeof *t);
    t->srv_max_queued = srv_max_queued;
    assert_int_equal(uv_loop_init(&t->loop), 0);
    char err[ERRLEN] = "";
    int rc = ro__listener_open(&t->server, &t->loop, "127.0.0.1:0", "--listen", false, "test_conn",
                               on_connection, t, t->bound, sizeof t->bound, err, sizeof err);
    if (rc)
        fail_msg("listen: %s", err);
    assert_int_equal(strncmp(t->bound, "127.0.0.1:", 10), 0);
    assert_true(atoi(t->bound + 10) > 0); /* the port the kernel chose */
}

static struct sockaddr_storage bound_addr(fixture_t *t)
{
    ro_addr_t a;
    struct sockaddr_storage ss;
    char err[ERRLEN];
    assert_int_equal(ro__addr_parse(t->bound, false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&t->loop, &a, &ss, "--connect", err, sizeof err), 0);
    return ss;
}

static void free_kept(end_t *e)
{
    for (uint32_t i = 0; i < e->frames && i < 4; i++)
        ro__frame_free(&e->alloc, e->kept[i]);
    assert_int_equal(e->alloc.used, 0); /* every decoded frame given back */
}

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

static bool both_closed(void *ctx)
{
    fixture_t *t = ctx;
    return t->srv.closed && t->cli.closed;
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
    assert_int_equal(ro__conn_goodbye(&t->cli.c, "done here"), 0);
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

/* A connected pair on t: the client connected, the server accepted. */
static void connect_pair(fixture_t *t)
{
    listen_loopback(t, 256u << 20);
    struct sockaddr_storage ss = bound_addr(t);
    ro_conn_opts_t co = opts_for(&t->cli, 64u << 20);
    assert_int_equal(ro__conn_connect(&t->cli.c, &t->loop, (struct sockaddr *)&ss, &co), 0);
    loop_wait_flag(&t->loop, &t->cli.connected, "the client's on_connect with status 0");
    loop_wait_flag(&t->loop, &t->accepted, "the listener accepting the client");
}

typedef struct numbered_wait {
    fixture_t *t;
    uint32_t want;
} numbered_wait_t;

static bool got_numbered(void *ctx)
{
    numbered_wait_t *w = ctx;
    return w->t->cli.frames >= w->want;
}

static bool srv_drained(void *ctx)
{
    return ro__conn_queued(&((fixture_t *)ctx)->srv.c) == 0;
}

/* Small frames are written at once when nothing is queued before them,
 * and go behind the queue otherwise (conn.c, DIRECT_MAX). Sent without
 * letting the loop run, until the kernel's buffers are full and frames
 * wait in the queue, then more behind them; then, once the queue drained,
 * direct again: every frame arrives whole, once, in order. */
static void test_order_through_full_buffers(void **state)
{
    (void)state;
    enum { SHORT = 20, AFTER_FULL = 400, AFTER_DRAIN = 100, MAX_SENDS = 200000 };
    fixture_t *t = calloc(1, sizeof *t);
    float *obs = calloc(NUM_FLOATS, sizeof(float));
    assert_non_null(t);
    assert_non_null(obs);
    connect_pair(t);
    t->cli.numbered = true;
    int32_t acts[NUM_DISCRETE];
    Rollout__V1__Actions a;
    Rollout__V1__Observations o;
    ro_frame_t f;
    uint64_t seq = 0;
    /* Half of a small frame written at once, the rest queued. */
    short_writes = true;
    for (uint32_t i = 0; i < SHORT; i++) {
        numbered_frame(++seq, &f, &a, acts, &o, obs);
        assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
        loop_wait(&t->loop, srv_drained, t, "the rest of a frame cut short, written");
    }
    short_writes = false;
    assert_true(short_written >= SHORT - SHORT / 8 - 1); /* all but the Observations frames */
    uint32_t after_full = 0;
    while (after_full < AFTER_FULL) {
        if (seq >= MAX_SENDS)
            fail_msg("%llu frames sent and the connection's queue still empty",
                     (unsigned long long)seq);
        numbered_frame(++seq, &f, &a, acts, &o, obs);
        assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
        after_full += ro__conn_queued(&t->srv.c) > 0;
    }
    print_message("the queue took frames after %llu sends\n",
                  (unsigned long long)(seq - AFTER_FULL));
    numbered_wait_t w = {t, (uint32_t)seq};
    loop_wait(&t->loop, srv_drained, t, "the server's queue draining to the reading client");
    for (uint32_t i = 0; i < AFTER_DRAIN; i++) {
        numbered_frame(++seq, &f, &a, acts, &o, obs);
        assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
    }
    w.want = (uint32_t)seq;
    loop_wait(&t->loop, got_numbered, &w, "every numbered frame at the client");
    if (t->cli.disorder[0])
        fail_msg("%s", t->cli.disorder);
    assert_int_equal(t->cli.frames, seq);
    assert_int_equal(t->cli.alloc.used, 0);
    ro__conn_close(&t->cli.c, "test over");
    loop_wait(&t->loop, both_closed, t, "both ends' on_closed");
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    free(obs);
    free(t);
}

/* ro__conn_read_now: nothing there, nothing happens; a frame there is
 * handed to on_frame before it returns, without the loop; the peer's end
 * is found as the loop's read finds it, and closes the connection. */
static void test_read_now(void **state)
{
    (void)state;
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    connect_pair(t);
    assert_int_equal(ro__conn_read_now(&t->cli.c), 0);
    assert_int_equal(t->cli.frames, 0);
    assert_int_equal(ro__conn_goodbye(&t->srv.c, "read me now"), 0);
    assert_int_equal(ro__conn_queued(&t->srv.c), 0); /* written at once: in the kernel */
    size_t got = 0;
    /* Loopback hands the bytes over within the send; the loop is not run. */
    for (int i = 0; i < 1000 && got == 0; i++)
        got = ro__conn_read_now(&t->cli.c);
    assert_true(got > 0);
    assert_int_equal(t->cli.frames, 1);
    assert_int_equal(t->cli.kept[0]->body_case, ROLLOUT__V1__FRAME__BODY_GOODBYE);
    assert_string_equal(t->cli.kept[0]->goodbye->reason, "read me now");
    ro__conn_close(&t->srv.c, "server done");
    loop_wait_flag(&t->loop, &t->srv.closed, "the server's on_closed");
    for (int i = 0; i < 1000 && !t->cli.c.closing; i++)
        assert_int_equal(ro__conn_read_now(&t->cli.c), 0);
    assert_true(t->cli.c.closing); /* the end of the stream, read now */
    loop_wait_flag(&t->loop, &t->cli.closed, "the client's on_closed");
    assert_string_equal(t->cli.why, "disconnected");
    assert_int_equal(ro__conn_read_now(&t->cli.c), 0); /* closed: nothing */
    free_kept(&t->cli);
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    free(t);
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
        cmocka_unit_test(test_connect_refused),  cmocka_unit_test(test_order_through_full_buffers),
        cmocka_unit_test(test_read_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
