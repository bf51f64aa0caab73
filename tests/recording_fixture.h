/*
 * A CartPole shard stepped by the test thread itself (as the env actor would
 * step it, auto-reset included) and recorded by a real recorder: the cmocka
 * tests of the recorder and of replay use it to make trajectory files whose
 * every entry they know. Include once per test file, after cmocka.h.
 *
 * The shard's actor lives on a loop the test thread runs: when the pool is
 * empty the shard waits, as in the node, for the recorder's
 * RO_MSG_RECORD_RESUME (an event; the only clock is a hang guard).
 */
#ifndef RO_TEST_RECORDING_FIXTURE_H
#define RO_TEST_RECORDING_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h>

#include "actors/env_actor.h"
#include "envs/registry.h"
#include "actors/messages.h"
#include "actors/recorder_actor.h"
#include "trajectory/reader.h"
#include "trajectory/writer.h"

#define REC_ENVS 4
#define REC_SEED 7u

typedef struct recording {
    ro_env_kind_t kind;
    ro_env_shard_t sh;
    ro_recorder_t *rec;
    ro_rec_port_t *port;
    char path[256];
    uv_loop_t loop;   /* the shard actor's home: the test thread runs it */
    uv_async_t async; /* wakes the loop for the shard's mailbox */
    uv_timer_t guard; /* hang guard while waiting for a chunk */
    bool resumed, timed_out;
    uint64_t waited; /* captures that had to wait */
} recording_t;

/* Only a lost message takes this long. */
#define REC_HANG_GUARD_MS 120000

/* The shard's behaviour: its chunk has come; record the waiting capture. */
static void rec_resume_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    recording_t *t = ro__container_of(self, recording_t, sh.actor);
    assert_int_equal(msg->type, RO_MSG_RECORD_RESUME);
    ro__recorder_resume(t->port);
    t->resumed = true;
}

static void rec_on_guard(uv_timer_t *h)
{
    recording_t *t = h->data;
    t->timed_out = true;
}

/* Captures the shard's step (or reset); with the pool empty, runs the loop
 * until the recorder hands the shard a chunk. Returns whether it waited. */
static bool rec_capture(recording_t *t, bool start)
{
    if (ro__recorder_capture(t->port, start))
        return false;
    t->waited++;
    t->resumed = t->timed_out = false;
    assert_int_equal(uv_timer_start(&t->guard, rec_on_guard, REC_HANG_GUARD_MS, 0), 0);
    while (!t->resumed && !t->timed_out)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->guard);
    if (!t->resumed)
        fail_msg("the recorder never handed the waiting shard a chunk (RO_MSG_RECORD_RESUME)");
    return true;
}

/* A cartpole shard of REC_ENVS envs and a recorder writing to path
 * (max_bytes: rotation, 0 = none; chunks: the pool, 0 = automatic; drop:
 * --record-full drop). The I/O thread is not started: see recording_start. */
static void recording_open(recording_t *t, const char *path, uint64_t max_bytes, uint32_t chunks,
                           bool drop)
{
    char err[512] = "";
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    assert_int_equal(ro__env_open(&t->kind, "cartpole", err, sizeof err), 0);
    assert_int_equal(
        ro__env_shard_init(&t->sh, t->kind.vt, NULL, 0, 0, REC_ENVS, REC_SEED, err, sizeof err), 0);
    ro_recorder_opts_t o = {
        .path = t->path,
        .max_bytes = max_bytes,
        .chunks = chunks,
        .drop = drop,
        .vt = t->kind.vt,
        .env_spec = "cartpole",
        .seed = REC_SEED,
        .num_envs = REC_ENVS,
        .policy = "test: fixed actions",
        .obs_dim = t->sh.xchg.obs_dim,
        .act_dim = t->sh.xchg.act_dim,
        .discrete = t->sh.xchg.discrete,
        .nshards = 1,
        .max_shard = REC_ENVS,
    };
    int rc = ro__recorder_new(&t->rec, &o, err, sizeof err);
    if (rc)
        fail_msg("ro__recorder_new: %s", err);
    t->sh.xchg.env = &t->sh.actor; /* where the recorder's RESUME goes */
    t->port = ro__recorder_port(t->rec, 0, &t->sh.xchg);
    assert_int_equal(uv_loop_init(&t->loop), 0);
    assert_int_equal(uv_async_init(&t->loop, &t->async, ro__actor_async_cb), 0);
    t->async.data = &t->sh.actor;
    ro__actor_init_loop(&t->sh.actor, "env", rec_resume_behaviour, &t->async);
    assert_int_equal(uv_timer_init(&t->loop, &t->guard), 0);
    t->guard.data = t;
}

static void recording_start(recording_t *t)
{
    char err[256];
    assert_int_equal(ro__recorder_start(t->rec, err, sizeof err), 0);
}

/* The env actor's START: reset every env into obs. */
static void shard_reset(ro_env_shard_t *s)
{
    for (uint32_t j = 0; j < s->xchg.n; j++) {
        s->vt->reset(s->envs[j], s->xchg.obs + (size_t)j * s->xchg.obs_dim);
        s->xchg.reward[j] = 0.0f;
        s->xchg.terminated[j] = s->xchg.truncated[j] = s->xchg.has_final[j] = 0;
        s->xchg.episode_start[j] = 1;
    }
}

/* The env actor's step with auto-reset, with the action of env j at step k
 * a fixed function of (j, k), so that a replay re-steps exactly this. */
static void shard_step(ro_env_shard_t *s, uint64_t k)
{
    const size_t od = s->xchg.obs_dim;
    for (uint32_t j = 0; j < s->xchg.n; j++) {
        float *o = s->xchg.obs + (size_t)j * od;
        s->xchg.act_i[j] = (int32_t)((j * 7 + k) % 2);
        ro_action_t a = {.discrete = s->xchg.act_i[j]};
        ro_step_t st = {0};
        assert_int_equal(s->vt->step(s->envs[j], a, o, &st), 0);
        s->xchg.reward[j] = st.reward;
        s->xchg.terminated[j] = st.terminated != 0;
        s->xchg.truncated[j] = st.truncated != 0;
        if (st.terminated || st.truncated) {
            memcpy(s->xchg.final_obs + (size_t)j * od, o, od * sizeof(float));
            s->xchg.has_final[j] = 1;
            s->vt->reset(s->envs[j], o);
            s->xchg.episode_start[j] = 1;
        } else {
            s->xchg.has_final[j] = 0;
            s->xchg.episode_start[j] = 0;
        }
    }
}

/* Finish the recorder (every chunk written, file closed) and free it all. */
static void recording_close(recording_t *t, ro_recorder_stats_t *st)
{
    char err[512] = "";
    int rc = ro__recorder_finish(t->rec, err, sizeof err);
    if (rc)
        fail_msg("ro__recorder_finish: %s", err);
    if (st)
        ro__recorder_stats(t->rec, st);
    ro__recorder_free(t->rec);
    uv_close((uv_handle_t *)&t->async, NULL);
    uv_close((uv_handle_t *)&t->guard, NULL);
    assert_int_equal(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    ro__env_shard_destroy(&t->sh);
    ro__env_close(&t->kind);
}

/* Records a reset and `steps` steps (waiting for chunks when the pool is
 * empty) and closes; returns the recorder's figures. */
static ro_recorder_stats_t record_steps(const char *path, uint64_t steps, uint64_t max_bytes)
{
    recording_t t;
    recording_open(&t, path, max_bytes, 0, false);
    recording_start(&t);
    shard_reset(&t.sh);
    rec_capture(&t, true);
    for (uint64_t k = 0; k < steps; k++) {
        shard_step(&t.sh, k);
        rec_capture(&t, false);
    }
    ro_recorder_stats_t st;
    recording_close(&t, &st);
    return st;
}

/* The whole file at path (free it); NULL if missing. */
static uint8_t *slurp_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat sb;
    assert_int_equal(fstat(fileno(f), &sb), 0);
    uint8_t *data = malloc((size_t)sb.st_size + 1);
    assert_non_null(data);
    *len = fread(data, 1, (size_t)sb.st_size, f);
    assert_int_equal(*len, (size_t)sb.st_size);
    fclose(f);
    return data;
}

#endif
