/*
 * rollout-replay --serve (programs/replay/serve.c) over a CartPole
 * recording whose every action the test knows (recording_fixture.h: env j
 * at step k took (7j + k) mod 2). ro__replay_serve runs on its own thread;
 * the test is the learner, on its own loop through the connection module.
 * A learner answering each frame with the recorded actions is welcomed
 * with the recording's env and envs, gets every step's observations, a
 * goodbye at the end, and the exit status 0 with no mismatch; one wrong
 * answer is counted and named (env, step, the two actions). A hello with
 * the wrong token is refused by name and the replay goes on to serve the
 * next learner; actions for another frame end the serve with status 1,
 * naming both seqs. A file that is no recording, or an address off
 * loopback without a token, is refused (status 2) by name. Every wait is
 * for a frame, a close or a log line, with one hang guard.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_fixture.h"
#include "recording_fixture.h"
#include "replay/serve.h"
#include "runtime/error.h"
#include "tmpdir_fixture.h"
#include "wire/addr.h"
#include "wire/conn.h"

#define STEPS 20
#define LOGMAX 8192

/* The replay's thread: its options, files, log (a pipe) and status. */
typedef struct server {
    pthread_t th;
    ro_serve_opts_t o;
    ro_serve_file_t file;
    FILE *log; /* the pipe's write end */
    int rfd;   /* the pipe's read end */
    char out[LOGMAX];
    size_t outlen;
    int status;
} server_t;

/* The test's learner: one connection at a time. */
typedef struct learner {
    uv_loop_t loop;
    ro_conn_t c;
    ro_pb_alloc_t alloc;
    const char *token;
    bool connected, closed;
    bool welcomed, goodbye, error;
    char env[32];
    uint32_t num_envs;
    char error_msg[256];
    uint64_t frames, rows;
    uint64_t wrong_seq_at; /* answer this frame with another seq (0: never) */
    uint64_t flip_at;      /* flip env flip_env's action in this frame (0: never) */
    uint32_t flip_env;
    char why[256];
} learner_t;

static void *serve_thread(void *arg)
{
    server_t *s = arg;
    s->status = ro__replay_serve(&s->o, &s->file, 1, s->log);
    fflush(s->log);
    return NULL;
}

/* read_log reads the replay's log into s->out until want appears (or
 * EOF); the hang guard fails the test naming want. */
static void read_log(server_t *s, const char *want)
{
    while (!strstr(s->out, want)) {
        struct pollfd p = {.fd = s->rfd, .events = POLLIN};
        int rc = poll(&p, 1, LOOP_HANG_GUARD_MS);
        if (rc == 0)
            fail_msg("never came within the %d s hang guard: '%s' in the replay's log (%s)",
                     LOOP_HANG_GUARD_MS / 1000, want, s->out);
        if (rc < 0 && errno == EINTR)
            continue;
        assert_true(rc > 0);
        assert_true(s->outlen < LOGMAX - 1);
        ssize_t n = read(s->rfd, s->out + s->outlen, LOGMAX - 1 - s->outlen);
        assert_true(n >= 0);
        if (n == 0)
            break; /* EOF */
        s->outlen += (size_t)n;
        s->out[s->outlen] = '\0';
    }
}

static void server_start(server_t *s, const char *path, const char *token)
{
    memset(s, 0, sizeof *s);
    int p[2];
    assert_int_equal(pipe(p), 0);
    s->rfd = p[0];
    s->log = fdopen(p[1], "w");
    assert_non_null(s->log);
    s->file.name = path;
    s->file.fd = open(path, O_RDONLY);
    assert_true(s->file.fd >= 0);
    s->o.addr = "127.0.0.1:0";
    s->o.token = token;
    assert_int_equal(pthread_create(&s->th, NULL, serve_thread, s), 0);
    read_log(s, "\n"); /* the first line: "serving on ...", or why not */
}

/* server_join waits for the replay's end and reads the rest of its log. */
static int server_join(server_t *s)
{
    assert_int_equal(pthread_join(s->th, NULL), 0);
    fclose(s->log);
    read_log(s, "\x01"); /* to EOF: the text never holds it */
    close(s->rfd);
    close(s->file.fd);
    return s->status;
}

/* The port the replay printed ("serving on 127.0.0.1:PORT"). */
static const char *served_addr(server_t *s)
{
    static char addr[64];
    const char *at = strstr(s->out, "serving on ");
    if (!at)
        fail_msg("no 'serving on' line: %s", s->out);
    assert_int_equal(sscanf(at, "serving on %63s", addr), 1);
    return addr;
}

static void send_hello(learner_t *l)
{
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    h.protocol_version = RO_PROTOCOL_VERSION;
    h.role = "learner";
    h.token = (char *)l->token;
    h.name = "test-learner";
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &h;
    assert_int_equal(ro__conn_send(&l->c, &f), 0);
}

/* Answer frame seq with each row's recorded action: frame seq holds the
 * observations before step seq - 1. */
static void answer(learner_t *l, const Rollout__V1__Observations *o)
{
    int32_t act[REC_ENVS];
    assert_true(o->n_env <= REC_ENVS);
    for (size_t r = 0; r < o->n_env; r++) {
        uint32_t j = o->env[r];
        act[r] = (int32_t)((j * 7 + o->seq - 1) % 2);
        if (o->seq == l->flip_at && j == l->flip_env)
            act[r] = 1 - act[r];
    }
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = o->seq == l->wrong_seq_at ? o->seq + 5 : o->seq;
    a.discrete = act;
    a.n_discrete = o->n_env;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
    f.actions = &a;
    assert_int_equal(ro__conn_send(&l->c, &f), 0);
}

static void on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    learner_t *l = c->o.owner;
    (void)keep;
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_WELCOME:
        l->welcomed = true;
        snprintf(l->env, sizeof l->env, "%s", f->welcome->spec->env);
        l->num_envs = f->welcome->spec->num_envs;
        break;
    case ROLLOUT__V1__FRAME__BODY_OBSERVATIONS:
        assert_true(l->welcomed);
        l->frames++;
        assert_int_equal(f->observations->seq, l->frames);
        l->rows += f->observations->n_env;
        answer(l, f->observations);
        break;
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        l->goodbye = true;
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        l->error = true;
        snprintf(l->error_msg, sizeof l->error_msg, "%s", f->error->message);
        break;
    default:
        fail_msg("unexpected %s frame from the replay", ro__frame_kind(f));
    }
}

static void on_connect(ro_conn_t *c, int status)
{
    learner_t *l = c->o.owner;
    assert_int_equal(status, 0);
    l->connected = true;
    send_hello(l);
}

static void on_closed(ro_conn_t *c)
{
    learner_t *l = c->o.owner;
    l->closed = true;
    snprintf(l->why, sizeof l->why, "%s", c->why);
}

static const ro_conn_ops_t learner_ops = {
    .on_frame = on_frame, .on_connect = on_connect, .on_closed = on_closed};

/* learn connects to addr with token and runs the loop until the replay
 * closes the connection. */
static void learn(learner_t *l, const char *addr, const char *token)
{
    l->token = token;
    l->connected = l->closed = l->welcomed = l->goodbye = l->error = false;
    l->frames = l->rows = 0;
    ro_addr_t a;
    struct sockaddr_storage ss;
    char err[256];
    assert_int_equal(ro__addr_parse(addr, false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&l->loop, &a, &ss, "--connect", err, sizeof err), 0);
    ro__pb_alloc_init(&l->alloc, 64u << 20);
    ro_conn_opts_t co = {
        .ops = &learner_ops,
        .owner = l,
        .program = "test_serve",
        .max_frame = 1u << 20,
        .max_queued = 16u << 20,
        .alloc = &l->alloc,
    };
    memset(&l->c, 0, sizeof l->c);
    assert_int_equal(ro__conn_connect(&l->c, &l->loop, (struct sockaddr *)&ss, &co), 0);
    loop_wait_flag(&l->loop, &l->closed, "the replay closing the learner's connection");
}

static char rec_path[256];

static int group_setup(void **state)
{
    (void)state;
    if (tmpdir_create("serve") != 0)
        return -1;
    snprintf(rec_path, sizeof rec_path, "%s/cartpole.traj", tmpdir);
    ro_recorder_stats_t st = record_steps(rec_path, STEPS, 0);
    return st.files == 1 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

static int setup(void **state)
{
    learner_t *l = calloc(1, sizeof *l);
    assert_non_null(l);
    assert_int_equal(uv_loop_init(&l->loop), 0);
    *state = l;
    return 0;
}

static int teardown(void **state)
{
    learner_t *l = *state;
    loop_finish(&l->loop);
    free(l);
    return 0;
}

/* The recorded answers: every step served, 0 mismatches, status 0. */
static void test_serves_every_step(void **state)
{
    learner_t *l = *state;
    server_t s;
    server_start(&s, rec_path, NULL);
    learn(l, served_addr(&s), "");
    assert_true(l->welcomed);
    assert_string_equal(l->env, "cartpole");
    assert_int_equal(l->num_envs, REC_ENVS);
    assert_true(l->goodbye);
    assert_false(l->error);
    assert_int_equal(l->frames, STEPS + 1); /* the resets' observations, then each step's */
    assert_int_equal(l->rows, (uint64_t)(STEPS + 1) * REC_ENVS);
    assert_int_equal(server_join(&s), 0);
    char want[200];
    snprintf(want, sizeof want,
             "served %u observations in %u frames; compared %u actions with the recording: 0 "
             "mismatch(es)\n",
             (STEPS + 1) * REC_ENVS, STEPS + 1, STEPS * REC_ENVS);
    if (!strstr(s.out, want))
        fail_msg("expected '%s' in: %s", want, s.out);
}

/* A wrong token is refused by name; the next learner is served, and its
 * one wrong answer is counted and named. */
static void test_token_then_mismatch(void **state)
{
    learner_t *l = *state;
    server_t s;
    server_start(&s, rec_path, "secret");
    const char *addr = served_addr(&s);
    learn(l, addr, "not-it");
    assert_true(l->error);
    assert_non_null(strstr(l->error_msg, "missing or wrong token"));
    assert_false(l->welcomed);
    l->flip_at = 4; /* before step 3 */
    l->flip_env = 2;
    learn(l, addr, "secret");
    assert_true(l->welcomed);
    assert_true(l->goodbye);
    assert_int_equal(l->frames, STEPS + 1);
    assert_int_equal(server_join(&s), 0);
    assert_non_null(strstr(s.out, "1 mismatch(es); first: env 2, agent 0, episode "));
    /* Env 2 at step 3 took (14 + 3) mod 2 = 1; the learner said 0. */
    assert_non_null(strstr(s.out, "entry 0: recorded 1, learner 0"));
}

/* Actions for another frame: the learner broke the protocol, status 1. */
static void test_wrong_seq_ends_the_serve(void **state)
{
    learner_t *l = *state;
    server_t s;
    server_start(&s, rec_path, NULL);
    l->wrong_seq_at = 3;
    learn(l, served_addr(&s), "");
    assert_int_equal(l->frames, 3);
    assert_true(l->error);
    assert_string_equal(l->error_msg, "actions for seq 8; expected those for 3");
    assert_false(l->goodbye);
    assert_int_equal(server_join(&s), 1);
}

/* A file that is no recording: status 2, the file named. */
static void test_not_a_recording(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/junk.traj", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a trajectory file at all, just words\n", f);
    fclose(f);
    server_t s;
    server_start(&s, path, NULL);
    assert_int_equal(server_join(&s), 2);
    assert_non_null(strstr(s.out, "junk.traj: "));
    assert_null(strstr(s.out, "serving on"));
}

/* Off loopback without a token: refused before listening, status 2. */
static void test_off_loopback_needs_a_token(void **state)
{
    (void)state;
    server_t s;
    memset(&s, 0, sizeof s);
    int p[2];
    assert_int_equal(pipe(p), 0);
    FILE *log = fdopen(p[1], "w");
    assert_non_null(log);
    ro_serve_file_t file = {.name = rec_path, .fd = open(rec_path, O_RDONLY)};
    assert_true(file.fd >= 0);
    ro_serve_opts_t o = {.addr = "0.0.0.0:0"};
    assert_int_equal(ro__replay_serve(&o, &file, 1, log), 2);
    fclose(log);
    s.rfd = p[0];
    read_log(&s, "\x01");
    close(p[0]);
    close(file.fd);
    assert_non_null(strstr(s.out, "--serve '0.0.0.0:0' is not a loopback address"));
    assert_non_null(strstr(s.out, "--token-file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_serves_every_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_then_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_seq_ends_the_serve, setup, teardown),
        cmocka_unit_test(test_not_a_recording),
        cmocka_unit_test(test_off_loopback_needs_a_token),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
