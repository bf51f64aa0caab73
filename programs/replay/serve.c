/*
 * rollout-replay --serve: a node for one learner, on a libuv loop and the
 * one connection module (wire/conn.h). Connections wait in a gate as at a
 * node (wire/gate.h: small frames, a few slots, a hello deadline); the
 * first whose hello checks out (token included) is served, later ones are
 * refused. Then every recorded step batch goes out as one Observations
 * frame, and the Actions frame that answers it is checked against the
 * recorded action space and remembered, to compare with the action the
 * recording shows for each env's next step.
 */
#include "replay/serve.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "replay/recorded_env.h"
#include "replay/serve_rows.h"
#include "runtime/error.h"
#include "runtime/clock.h"
#include "runtime/rng.h"
#include "wire/obs_frame.h"
#include "runtime/text.h"
#include "trajectory/reader.h"
#include "wire/checks.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "wire/gate.h"
#include "wire/listener.h"

typedef struct serve {
    uv_loop_t loop;
    ro_listener_t listener;
    uv_timer_t watchdog; /* hello deadlines */
    ro_gate_t gate;      /* connections that have not said hello */
    ro_conn_t *learner;  /* the one served, once its hello checked out */
    const ro_serve_opts_t *o;
    ro_pb_alloc_t alloc;
    FILE *log;
    const ro_serve_file_t *files;
    size_t nfiles, file;
    const Rollout__V1__TrajectoryHeader *hdr; /* the first file's */
    ro_traj_reader_t rd;
    bool rd_open;
    uint32_t num_envs;
    ro_space_layout_t abi1_lay; /* an ABI 1 env's spaces as a layout (rows' layout) */
    ro_serve_rows_t rows_v;     /* the rows, frames and answers */
    bool welcomed, done;
    int status;
    uint64_t seq; /* the frame in flight */
    uint64_t frames, served_rows;
} serve_t;

static void finish(serve_t *s, int status, const char *why)
{
    if (s->done)
        return;
    s->done = true;
    s->status = status;
    if (s->learner)
        ro__conn_close(s->learner, why);
    for (ro_conn_t *c = ro__gate_first(&s->gate); c; c = ro__gate_next(c))
        ro__conn_close(c, "the replay is over");
    ro__listener_close(&s->listener);
    uv_close((uv_handle_t *)&s->watchdog, NULL);
}

/* The next recorded batch with rows, across the files; NULL at the end. */
static Rollout__V1__TransitionBatch *next_batch(serve_t *s)
{
    for (;;) {
        if (!s->rd_open) {
            if (s->file == s->nfiles)
                return NULL;
            char err[256];
            const ro_serve_file_t *f = &s->files[s->file];
            if (ro__traj_reader_open_fd(&s->rd, f->fd, true, err, sizeof err) != 0) {
                fprintf(s->log, "rollout-replay: %s: %s\n", f->name, err);
                s->file = s->nfiles;
                return NULL;
            }
            s->rd_open = true;
        }
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev = ro__traj_reader_next(&s->rd, &b);
        if (ev == RO_TRAJ_BATCH)
            return b;
        if (ev == RO_TRAJ_EOF) {
            ro__traj_reader_close(&s->rd);
            s->rd_open = false;
            s->file++;
            continue;
        }
        fprintf(s->log, "rollout-replay: %s: %s\n", s->files[s->file].name, s->rd.msg);
    }
}

/* Send the next Observations frame, or the goodbye at the end. */
static void send_next(serve_t *s)
{
    for (;;) {
        Rollout__V1__TransitionBatch *b = next_batch(s);
        if (!b) {
            ro__conn_goodbye(s->learner, "end of the recording", NULL);
            finish(s, 0, "end of the recording");
            return;
        }
        char err[256];
        int rows = ro__serve_rows_fill(&s->rows_v, b, err, sizeof err);
        ro__traj_batch_free(&s->rd, b);
        if (rows < 0) {
            fprintf(s->log, "rollout-replay: %s: %s\n", s->files[s->file].name, err);
            finish(s, 1, err);
            return;
        }
        if (rows == 0)
            continue;
        Rollout__V1__Observations ob = ROLLOUT__V1__OBSERVATIONS__INIT;
        ob.seq = ++s->seq;
        ro__serve_rows_frame(&s->rows_v, ob.seq, &ob);
        ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
        f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
        f.observations = &ob;
        s->frames++;
        s->served_rows += (uint64_t)rows;
        if (ro__conn_send(s->learner, &f) != 0)
            finish(s, 1, "could not send");
        return;
    }
}

static void on_actions(serve_t *s, const Rollout__V1__Actions *a)
{
    char err[256];
    int rc = a->seq != s->seq ? ro__errorf(err, sizeof err, RO_EPROTO,
                                           "actions for seq %llu; expected those for %llu",
                                           (unsigned long long)a->seq, (unsigned long long)s->seq)
                              : ro__serve_rows_answer(&s->rows_v, a, err, sizeof err);
    if (rc) {
        ro__conn_fail(s->learner, rc, "%s", err);
        finish(s, 1, err);
        return;
    }
    send_next(s);
}

static void send_welcome(serve_t *s, const Rollout__V1__TrajectoryHeader *h)
{
    Rollout__V1__Space o = ROLLOUT__V1__SPACE__INIT, a = ROLLOUT__V1__SPACE__INIT;
    uint32_t oshape[RO_SPACE_MAX_DIMS], ashape[RO_SPACE_MAX_DIMS];
    const ro_serve_rows_t *v = &s->rows_v;
    ro__wire_space(&o, &v->os, oshape);
    ro__wire_space(&a, &v->as, ashape);
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    spec.env = h->env;
    if (v->abi1_frames) { /* an ABI 1 env's spaces; any other's welcome has its layout */
        spec.observation = &o;
        spec.action = &a;
    }
    spec.num_envs = h->num_envs;
    spec.max_episode_steps = h->max_episode_steps;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = RO_PROTOCOL_VERSION;
    w.node_id = ro__seed_mix(h->seed, h->start_time_unix_ns, 99);
    w.spec = &spec;
    w.seed = h->seed;
    w.node_index = h->node_index;
    w.max_frame = RO_WIRE_DEFAULT_MAX_FRAME;
    if (!v->abi1_frames) {
        w.mode = "seed";
        w.layout = &s->rows_v.lm.msg;
    }
    ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
    out.body_case = ROLLOUT__V1__FRAME__BODY_WELCOME;
    out.welcome = &w;
    if (ro__conn_send(s->learner, &out) != 0)
        finish(s, 1, "could not send the welcome");
}

/* A stranger's first frame: its hello, or it goes. The first good one is
 * served; the replay serves one learner, so later ones are refused. */
static void on_first_frame(serve_t *s, ro_conn_t *c, const ro_frame_t *f)
{
    char err[256];
    bool trainer;
    ro_hello_rules_t rules = {.learners = true, .token = s->o->token};
    int rc = ro__check_first_frame(f, &rules, &trainer, err, sizeof err);
    if (rc == 0 && s->learner)
        rc = ro__errorf(err, sizeof err, RO_ESHUTDOWN,
                        "this replay serves one learner, and it has one");
    if (rc) {
        ro__conn_fail(c, rc, "%s", err);
        return;
    }
    ro__gate_pass(&s->gate, c, RO_WIRE_DEFAULT_MAX_FRAME);
    s->learner = c;
    s->welcomed = true;
    send_welcome(s, s->hdr);
    if (!s->done)
        send_next(s);
}

static void on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    serve_t *s = c->o.owner;
    (void)keep;
    if (s->done)
        return;
    if (c != s->learner) {
        on_first_frame(s, c, f);
        return;
    }
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_ACTIONS) {
        on_actions(s, f->actions);
        return;
    }
    char err[128];
    snprintf(err, sizeof err, "expected the actions for the last observations, got %s",
             ro__frame_kind(f));
    ro__conn_fail(c, RO_EPROTO, "%s", err);
    finish(s, 1, err);
}

static void on_closed(ro_conn_t *c)
{
    serve_t *s = c->o.owner;
    ro__gate_leave(&s->gate, c);
    if (c == s->learner && !s->done) {
        char why[300];
        fprintf(s->log, "rollout-replay: learner %s\n",
                ro__text_log(why, sizeof why, c->why[0] ? c->why : "disconnected", 200));
        finish(s, 1, c->why);
    }
    if (c != s->learner)
        free(c); /* the learner's is freed with s */
}

static const ro_conn_ops_t serve_ops = {.on_frame = on_frame, .on_closed = on_closed};

static void on_connection(ro_listener_t *l, int fd)
{
    serve_t *s = l->data;
    ro_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    ro_conn_opts_t o = {
        .ops = &serve_ops,
        .owner = s,
        .program = "rollout-replay",
        .max_frame = RO_WIRE_DEFAULT_MAX_FRAME,
        .max_queued = RO_CONN_MAX_QUEUED,
        .alloc = &s->alloc,
    };
    if (ro__conn_accept(c, &s->loop, fd, &o) != 0) {
        free(c);
        return;
    }
    snprintf(c->label, sizeof c->label, "learner %s", c->peer);
    if (s->done) {
        ro__conn_fail(c, RO_ESHUTDOWN, "the replay is over");
        return;
    }
    ro_conn_t *drop = ro__gate_admit(&s->gate, c, ro__now_ns());
    if (drop)
        ro__conn_fail(drop, RO_ETIMEDOUT,
                      "dropped: %u connections wait for their hello, this one the longest",
                      s->gate.slots);
}

static void on_watchdog(uv_timer_t *t)
{
    serve_t *s = t->data;
    for (ro_conn_t *c; (c = ro__gate_expired(&s->gate, ro__now_ns()));)
        ro__conn_fail(c, RO_EPROTO, "no hello within %.1f s", s->o->hello_timeout_s);
}

static int listen_on(serve_t *s, const char *spec)
{
    char err[400], name[80];
    /* As at a node: off loopback only with a token. */
    int rc =
        ro__listener_open(&s->listener, &s->loop, spec, "--serve", s->o->token != NULL,
                          "rollout-replay", on_connection, s, name, sizeof name, err, sizeof err);
    if (rc) {
        fprintf(s->log, "rollout-replay: %s\n", err);
        return rc;
    }
    uv_timer_init(&s->loop, &s->watchdog); /* timers cannot fail to initialise */
    s->watchdog.data = s;
    if (s->o->hello_timeout_s > 0) {
        uint64_t ms = (uint64_t)(s->o->hello_timeout_s * 250.0); /* 4 looks per deadline */
        uv_timer_start(&s->watchdog, on_watchdog, ms ? ms : 1, ms ? ms : 1);
    }
    fprintf(s->log, "rollout-replay: serving on %s\n", name);
    fflush(s->log);
    return 0;
}

/* The recorded env as the node made it, and the layout of its rows: a
 * version 2 header's (matched by the re-created env's), or an ABI 1 env's
 * spaces, as one instance reports them, adapted to one. */
static int open_rows(serve_t *s, const Rollout__V1__TrajectoryHeader *h, const char *plugin,
                     ro_recorded_env_t *renv, void **env)
{
    char err[512];
    ro_space_t os, as;
    const ro_space_layout_t *lay = &renv->layout;
    int rc = ro__recorded_env_open(renv, h, plugin, err, sizeof err);
    if (rc == 0 && !h->layout &&
        (rc = ro__recorded_env_create(renv, h, 0, env, err, sizeof err)) == 0) {
        renv->kind.vt->spaces(*env, &os, &as);
        rc = ro__layout_from_abi1(&s->abi1_lay, &os, &as, "the recorded env", err, sizeof err);
        lay = &s->abi1_lay;
    }
    if (rc == 0)
        rc = ro__serve_rows_init(&s->rows_v, h, lay, h->layout ? NULL : &os, h->layout ? NULL : &as,
                                 err, sizeof err);
    if (rc)
        fprintf(s->log, "rollout-replay: %s\n", err);
    return rc;
}

int ro__replay_serve(const ro_serve_opts_t *o, const ro_serve_file_t *files, size_t nfiles,
                     FILE *log)
{
    serve_t *s = calloc(1, sizeof *s);
    if (!s)
        return 2;
    s->o = o;
    s->log = log;
    s->files = files;
    s->nfiles = nfiles;
    s->status = 2;
    ro__pb_alloc_init(&s->alloc, 4 * (size_t)RO_WIRE_DEFAULT_MAX_FRAME);
    ro__gate_init(&s->gate, RO_GATE_MIN_SLOTS, o->hello_timeout_s);
    ro_traj_reader_t first;
    char err[256];
    if (ro__traj_reader_open_fd(&first, files[0].fd, true, err, sizeof err) != 0) {
        fprintf(log, "rollout-replay: %s: %s\n", files[0].name, err);
        free(s);
        return 2;
    }
    const Rollout__V1__TrajectoryHeader *h = first.hdr;
    ro_recorded_env_t renv = {0};
    void *env = NULL;
    int lrc = uv_loop_init(&s->loop);
    if (lrc) {
        fprintf(log, "rollout-replay: cannot start the event loop: %s\n", uv_strerror(lrc));
        ro__traj_reader_close(&first);
        free(s);
        return 2;
    }
    if (open_rows(s, h, o->plugin, &renv, &env) == 0) {
        s->num_envs = h->num_envs;
        s->hdr = h;
        const ro_serve_rows_t *v = &s->rows_v;
        if (listen_on(s, o->addr) == 0) {
            s->status = 1;
            uv_run(&s->loop, UV_RUN_DEFAULT);
            fprintf(log,
                    "rollout-replay: served %llu observations in %llu frames; compared %llu "
                    "actions with the recording: %llu mismatch(es)%s%s\n",
                    (unsigned long long)s->served_rows, (unsigned long long)s->frames,
                    (unsigned long long)v->compared, (unsigned long long)v->mismatches,
                    v->mismatches ? "; first: " : "", v->first_mismatch);
        }
    }
    uv_run(&s->loop, UV_RUN_DEFAULT); /* closes */
    uv_loop_close(&s->loop);
    int status = s->status;
    if (s->rd_open)
        ro__traj_reader_close(&s->rd);
    if (env)
        renv.kind.vt->destroy(env);
    ro__serve_rows_free(&s->rows_v); /* before the layouts it points to */
    ro__layout_free(&s->abi1_lay);
    ro__recorded_env_close(&renv);
    ro__traj_reader_close(&first);
    free(s->learner);
    free(s);
    return status;
}
