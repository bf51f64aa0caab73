#include "actors/recorder/recorder_actor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "actors/exchange/step_batch.h"
#include "runtime/error.h"
#include "runtime/grant_pool.h"
#include "runtime/mutex.h"
#include "actors/exchange/messages.h"
#include "actors/recorder/recorder_chunk.h"
#include "envs/env_kind.h"
#include "envs/env_state.h"
#include "trajectory/abi2_format.h"
#include "trajectory/writer.h"

/* The pool is at most this big, and at most CHUNKS_PER_SHARD chunks per
 * shard: enough to ride out a disk hiccup, small enough to stay bounded. */
#define POOL_BYTES (64u << 20)
#define CHUNKS_PER_SHARD 16
/* The I/O thread sleeps at most this long, and writes its buffer out once
 * data has waited this long: a killed node loses at most ~FLUSH_NS. */
#define IDLE_WAIT_NS (5 * 1000000ull)
#define FLUSH_NS (50 * 1000000ull)

struct ro_recorder {
    /* Read-only after ro__recorder_new. */
    ro_rec_rows_t rows; /* what a chunk's rows hold */
    bool drop, keep_going;
    ro_actor_t *on_error;
    ro_msg_t error_msg;  /* I/O thread -> on_error, sent once */
    uint32_t snap_every; /* --snapshot-every, 0: none */
    const ro_env_kind_t *kind;
    uint64_t params;

    /* I/O thread only (main thread before start and after join). */
    ro_traj_writer_t w;
    Rollout__V1__TrajectoryHeader hdr;
    Rollout__V1__EnvArg *args;
    Rollout__V1__EnvArg **argp;
    ro_traj_layout_msg_t layout; /* ABI 2: the header's layout */
    ro_rec_batch_t rb;           /* the chunk being encoded (its snapshots' memory) */
    uint64_t snapshots;
    char policy[128];
    int io_rc;
    char io_err[256];
    uint64_t transitions, resets;
    uint64_t lost_steps; /* not recorded: cut from the file or never written */
    uint64_t busy_ns;

    ro_rec_chunk_t *chunks;
    uint32_t nchunks;
    ro_rec_port_t *ports;
    uint32_t nports;
    void *mem; /* every array above and args, argp, rb's snapshots (carve) */

    pthread_t thread;
    bool started, finished;

    /* The free chunks and the shards waiting for one (its own lock). */
    ro_grant_pool_t pool;

    /* Shared: under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ro_rec_chunk_t *q_head, **q_tail;
    bool stop;
    bool io_sleeping;
    uint32_t queued;  /* chunks in the queue */
    uint32_t wake_at; /* wake a sleeping I/O thread at this many */

    /* Statistics: relaxed atomics (counters with no data behind them). */
    _Atomic uint64_t dropped_steps;
    _Atomic uint64_t waits;
    _Atomic uint64_t snapshot_failures;
};

/* make_header fills the file's header from o; it points into o and into r
 * (the env args carved, the layout made, by ro__recorder_new). */
static void make_header(ro_recorder_t *r, const ro_recorder_opts_t *o)
{
    Rollout__V1__TrajectoryHeader *h = &r->hdr;
    rollout__v1__trajectory_header__init(h);
    h->magic = (char *)RO_TRAJ_HEADER_MAGIC;
    h->format_version = o->snapshot_every ? RO_TRAJ_FORMAT_SNAPSHOTS
                        : o->layout       ? RO_TRAJ_FORMAT_VERSION
                                          : RO_TRAJ_FORMAT_ABI1;
    h->snapshot_every = o->snapshot_every;
    h->env = (char *)ro__env_kind_name(o->kind);
    h->env_spec = (char *)o->env_spec;
    for (size_t i = 0; i < o->nenv_args; i++) {
        rollout__v1__env_arg__init(&r->args[i]);
        /* protobuf-c wants non-const pointers; pack only reads them. */
        r->args[i].key = (char *)o->env_args[i].key;
        r->args[i].value = (char *)o->env_args[i].value;
        r->argp[i] = &r->args[i];
    }
    h->env_args = r->argp;
    h->n_env_args = o->nenv_args;
    h->max_episode_steps = o->max_episode_steps;
    h->seed = o->seed;
    h->node_index = o->node_index;
    h->num_envs = o->num_envs;
    snprintf(r->policy, sizeof r->policy, "%s", o->policy ? o->policy : "");
    h->policy = r->policy;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_time_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    h->obs_dim = o->obs_dim;
    h->action_kind = (char *)(o->discrete ? "discrete" : "box");
    h->action_dim = o->discrete ? 1 : o->act_dim;
    h->check_finite = o->check_finite;
    h->mujoco_version = (char *)(o->mujoco_version ? o->mujoco_version : "");
    h->max_record_bytes = (uint32_t)ro__rec_max_record(&r->rows);
    if (!o->layout)
        return;
    /* Version 2: the layout (ro__recorder_new's) says what the rows hold;
     * obs_dim is a flattened row's floats, action_dim a row's action values. */
    h->layout = &r->layout.msg;
    h->obs_dim = o->layout->obs_width;
    h->action_kind = (char *)"composite";
    h->action_dim = o->layout->ndisc + o->layout->nbox;
}

/* snapshot_opts sets up --snapshot-every: the states' size from the probe
 * instance (main thread), the params hash their headers carry, and room for
 * one state per env of a shard in each chunk (a shard's envs step
 * together). */
static int snapshot_opts(ro_recorder_t *r, const ro_recorder_opts_t *o, char *err, size_t errlen)
{
    size_t bytes;
    int rc = ro__env_state_bytes(o->kind, o->probe, &bytes, err, errlen);
    if (rc) {
        char why[384];
        snprintf(why, sizeof why, "%s", err);
        return ro__errorf(err, errlen, rc, "--snapshot-every: %s", why);
    }
    r->rows.snap_cap = o->layout ? o->max_shard / o->layout->agents : o->max_shard;
    r->rows.state_bytes = bytes;
    r->snap_every = o->snapshot_every;
    r->kind = o->kind;
    r->params = ro__env_params_hash(ro__env_kind_name(o->kind), o->env_args, o->nenv_args,
                                    o->max_episode_steps);
    return 0;
}

/* carve points the recorder's arrays into mem (NULL: only sizes them) and
 * returns their bytes, each array on cache lines of its own: the chunks and
 * their memory (cb_lines each), the ports and their episode and step
 * counters (max_shard each), the snapshots of the chunk being encoded and
 * the header's env args. */
static size_t carve(ro_recorder_t *r, const ro_recorder_opts_t *o, size_t cb_lines, char *mem)
{
    const size_t nc = r->nchunks, np = r->nports, per = o->max_shard, na = o->nenv_args + 1;
    size_t off = 0;
    r->chunks = ro__carve(mem, &off, nc * sizeof *r->chunks);
    char *chunk_mem = ro__carve(mem, &off, nc * cb_lines);
    r->ports = ro__carve(mem, &off, np * sizeof *r->ports);
    uint64_t *eps = ro__carve(mem, &off, np * per * sizeof *eps);
    uint32_t *steps = ro__carve(mem, &off, np * per * sizeof *steps);
    r->rb.snap = ro__carve(mem, &off, r->rows.snap_cap * sizeof *r->rb.snap);
    r->rb.snapp = ro__carve(mem, &off, r->rows.snap_cap * sizeof *r->rb.snapp);
    r->args = ro__carve(mem, &off, na * sizeof *r->args);
    r->argp = ro__carve(mem, &off, na * sizeof *r->argp);
    for (size_t i = 0; mem && i < nc; i++)
        ro__rec_chunk_carve(&r->rows, &r->chunks[i], chunk_mem + i * cb_lines);
    for (size_t i = 0; mem && i < np; i++) {
        r->ports[i].episode = eps + i * per;
        r->ports[i].step = steps + i * per;
    }
    return off;
}

int ro__recorder_new(ro_recorder_t **out, const ro_recorder_opts_t *o, char *err, size_t errlen)
{
    ro_recorder_t *r = ro__calloc_lines(1, sizeof *r);
    if (!r)
        return RO_ENOMEM;
    r->w.fd = -1;
    r->drop = o->drop;
    r->keep_going = o->keep_going;
    r->on_error = o->on_error;
    r->error_msg.type = RO_MSG_RECORD_FAILED;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    r->q_tail = &r->q_head;
    ro__grant_pool_init(&r->pool);
    atomic_init(&r->dropped_steps, 0);
    atomic_init(&r->waits, 0);
    atomic_init(&r->snapshot_failures, 0);
    int rc;
    /* ABI 2: the header's layout first; the rows are what it says, as a
     * reader of the file will take them. Every env may end an episode: its
     * step and its reset, per row. */
    if (o->layout && ro__traj_layout_msg_init(&r->layout, o->layout) != 0) {
        snprintf(err, errlen, "out of memory for the trajectory layout");
        rc = RO_ENOMEM;
        goto fail;
    }
    char why[256];
    rc = ro__rec_rows_init(&r->rows, o->layout ? &r->layout.msg : NULL, o->obs_dim, o->act_dim,
                           o->discrete, 2 * o->max_shard, why, sizeof why);
    if (rc) {
        snprintf(err, errlen, "--record: the env's layout: %s", why);
        goto fail;
    }
    if (o->snapshot_every && (rc = snapshot_opts(r, o, err, errlen)) != 0)
        goto fail;
    if (ro__rec_max_record(&r->rows) > RO_TRAJ_MAX_RECORD) {
        snprintf(err, errlen,
                 "--record: one shard step (%u rows x %u floats) exceeds the %u-byte record "
                 "limit; use a smaller --shard",
                 o->max_shard, o->obs_dim, RO_TRAJ_MAX_RECORD);
        rc = RO_ERANGE;
        goto fail;
    }
    size_t cb = ro__rec_chunk_bytes(&r->rows);
    uint64_t n = o->chunks;
    if (n == 0) {
        n = (uint64_t)CHUNKS_PER_SHARD * o->nshards;
        if (n * cb > POOL_BYTES)
            n = POOL_BYTES / cb;
        if (n < 2)
            n = 2;
    }
    r->nchunks = (uint32_t)n;
    /* Waking the I/O thread costs a syscall: let a quarter of the pool
     * gather first (a shard that finds the pool empty wakes it at once). */
    r->wake_at = r->nchunks / 4 ? r->nchunks / 4 : 1;
    size_t cb_lines = (cb + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
    r->nports = o->nshards;
    if (!(r->mem = ro__calloc_lines(carve(r, o, cb_lines, NULL), 1))) {
        snprintf(err, errlen, "out of memory for the recorder's %u chunks", r->nchunks);
        rc = RO_ENOMEM;
        goto fail;
    }
    carve(r, o, cb_lines, r->mem);
    for (uint32_t i = 0; i < r->nchunks; i++)
        ro__grant_pool_give(&r->pool, &r->chunks[i].item);
    for (uint32_t i = 0; i < r->nports; i++) {
        ro_rec_port_t *p = &r->ports[i];
        p->rec = r;
        p->resume_msg.type = RO_MSG_RECORD_RESUME;
        p->waiter.msg = &p->resume_msg;
    }
    make_header(r, o);
    rc = ro__traj_writer_open(&r->w, o->path, &r->hdr, o->max_bytes, err, errlen);
    if (rc) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "--record: %s", err);
        snprintf(err, errlen, "%s", tmp);
        goto fail;
    }
    *out = r;
    return 0;
fail:
    ro__recorder_free(r);
    return rc;
}

ro_rec_port_t *ro__recorder_port(ro_recorder_t *r, uint32_t i, const ro_step_batch_t *b,
                                 void *const *envs)
{
    r->ports[i].batch = b;
    r->ports[i].envs = envs;
    r->ports[i].waiter.to = b->env; /* the shard: its RESUME carries the granted chunk */
    return &r->ports[i];
}

/* ---- the shard's side (worker threads) ---- */

static void submit(ro_recorder_t *r, ro_rec_chunk_t *c)
{
    c->next = NULL;
    ro__mutex_lock(&r->mu);
    *r->q_tail = c;
    r->q_tail = &c->next;
    r->queued++;
    bool wake = r->io_sleeping && r->queued >= r->wake_at;
    ro__mutex_unlock(&r->mu);
    if (wake)
        pthread_cond_signal(&r->cv);
}

/* snapshot saves, after every snapshot_every-th step of the shard's envs
 * (they step together), each env's state into c, after its rows. On the
 * shard's thread, which owns the envs. An env that cannot save is counted
 * and left out. */
static void snapshot(ro_recorder_t *r, ro_rec_port_t *p, ro_rec_chunk_t *c, bool start)
{
    const ro_step_batch_t *s = p->batch;
    if (!r->snap_every || start || s->steps == 0 || s->steps % r->snap_every != 0)
        return;
    const uint32_t A = s->agents ? s->agents : 1, ne = s->n / A;
    const size_t sb = r->rows.state_bytes;
    for (uint32_t j = 0; j < ne && c->nsnap < r->rows.snap_cap; j++) {
        uint32_t k = c->nsnap;
        size_t len = 0;
        int rc = ro__env_state_save(r->kind, p->envs[j], r->params, p->step[j],
                                    c->snap_state + (size_t)k * sb, sb, &len, NULL, 0);
        if (rc || len != sb) {
            /* Relaxed: a statistic. */
            atomic_fetch_add_explicit(&r->snapshot_failures, 1, memory_order_relaxed);
            continue;
        }
        c->snap_env[k] = s->first + j;
        c->snap_episode[k] = p->episode[j];
        c->snap_step[k] = p->step[j];
        c->snap_env_steps[k] = s->steps;
        c->nsnap++;
    }
}

bool ro__recorder_capture(ro_rec_port_t *p, bool start)
{
    ro_recorder_t *r = p->rec;
    if (!r->drop)
        p->start = start; /* before the waiter is queued: its grant may come at once */
    ro_pool_item_t *it = ro__grant_pool_take(&r->pool, r->drop ? NULL : &p->waiter);
    ro_rec_chunk_t *c = it ? ro__container_of(it, ro_rec_chunk_t, item) : NULL;
    if (!c) {
        /* The pool is empty: every chunk is queued or being written. */
        ro__mutex_lock(&r->mu);
        bool wake = r->io_sleeping;
        ro__mutex_unlock(&r->mu);
        if (wake)
            pthread_cond_signal(&r->cv);
    }
    if (c) {
        ro__rec_chunk_fill(&r->rows, p, c, start);
        snapshot(r, p, c, start);
        submit(r, c);
        return true;
    }
    if (r->drop) {
        if (start) {
            /* A lost reset is no env step, but the file says something is missing. */
            ro__rec_port_skip(p, true);
        } else {
            /* Steps lost in drop mode still advance the counters, so
             * episode and step numbers in the file stay those of the node. */
            ro__rec_port_skip(p, false);
            /* Relaxed: a statistic. */
            atomic_fetch_add_explicit(&r->dropped_steps, p->batch->n, memory_order_relaxed);
        }
        return true;
    }
    atomic_fetch_add_explicit(&r->waits, 1, memory_order_relaxed);
    return false;
}

void ro__recorder_resume(ro_rec_port_t *p)
{
    ro_recorder_t *r = p->rec;
    ro_rec_chunk_t *c =
        ro__container_of(ro__grant_pool_claim(&r->pool, &p->waiter), ro_rec_chunk_t, item);
    ro__rec_chunk_fill(&r->rows, p, c, p->start);
    snapshot(r, p, c, p->start);
    submit(r, c);
}

/* ---- the I/O thread ---- */

/* Takes a writer call's result. The first failure is the only one: the
 * writer has cut the file back to its last whole record, nothing more is
 * written, and the node is told (stop) or the run goes on (continue). */
static void io_result(ro_recorder_t *r, int rc)
{
    if (!rc || r->io_rc)
        return;
    r->io_rc = rc;
    /* Records the writer cut had been counted as written. */
    r->transitions -= r->w.lost_steps;
    r->resets -= r->w.lost_resets;
    r->lost_steps += r->w.lost_steps;
    if (r->keep_going)
        fprintf(stderr,
                "rollout-node: recorder: %s; the run goes on unrecorded (--record-error "
                "continue)\n",
                r->io_err);
    else if (r->on_error)
        ro__actor_send(r->on_error, &r->error_msg);
}

static void encode_and_write(ro_recorder_t *r, ro_rec_chunk_t *c)
{
    if (r->io_rc) {
        r->lost_steps += ro__rec_chunk_steps(c); /* after a write error, chunks are only recycled */
        return;
    }
    if (c->count == 0 && c->nsnap == 0 && c->dropped == 0)
        return; /* every env of the shard was held (NEXT_STEP): nothing happened */
    /* Columns point into the chunk: nothing is copied before packing. */
    ro_rec_batch_t *rb = &r->rb;
    ro__rec_chunk_batch(&r->rows, c, rb);
    int rc = ro__traj_writer_append(&r->w, &rb->b, r->io_err, sizeof r->io_err);
    if (rc) {
        r->lost_steps += ro__rec_chunk_steps(c); /* this record never reached the buffer */
        io_result(r, rc);
        return;
    }
    r->snapshots += c->nsnap;
    for (uint32_t k = 0; k < c->count; k++) {
        if (c->flags[k] & RO_TRAJ_RESET)
            r->resets++;
        else
            r->transitions++;
    }
}

/* Give chunks back: to waiting shards first (with a message), then to the
 * free list. */
static void recycle(ro_recorder_t *r, ro_rec_chunk_t *list)
{
    ro_pool_item_t *items = NULL;
    while (list) {
        ro_rec_chunk_t *c = list;
        list = c->next;
        c->item.next = items;
        items = &c->item;
    }
    ro__grant_pool_give(&r->pool, items);
}

static void *io_main(void *arg)
{
    ro_recorder_t *r = arg;
    uint64_t unflushed_since = 0; /* 0: the buffer is empty */
    for (;;) {
        ro__mutex_lock(&r->mu);
        if (!r->q_head && !r->stop) {
            /* Sleep until woken (enough chunks, an empty pool, stop) or a
             * short timeout: a slow trickle of chunks still moves. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t t = (uint64_t)ts.tv_nsec + IDLE_WAIT_NS;
            ts.tv_sec += (time_t)(t / 1000000000ull);
            ts.tv_nsec = (long)(t % 1000000000ull);
            r->io_sleeping = true;
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
            r->io_sleeping = false;
        }
        ro_rec_chunk_t *list = r->q_head;
        r->q_head = NULL;
        r->q_tail = &r->q_head;
        r->queued = 0;
        bool stop = r->stop;
        ro__mutex_unlock(&r->mu);
        if (!list && stop)
            break;
        if (!list) {
            if (unflushed_since && ro__now_ns() - unflushed_since >= FLUSH_NS && !r->io_rc) {
                io_result(r, ro__traj_writer_flush(&r->w, r->io_err, sizeof r->io_err));
                unflushed_since = 0;
            }
            continue;
        }
        uint64_t t0 = ro__now_ns();
        for (ro_rec_chunk_t *c = list; c; c = c->next)
            encode_and_write(r, c);
        /* Full buffers were written by append; what is left goes out once
         * it has waited FLUSH_NS, so a reader (or a crash) sees whole
         * records soon without a write(2) per wake-up. */
        uint64_t now = ro__now_ns();
        if (r->w.len == 0)
            unflushed_since = 0;
        else if (!unflushed_since)
            unflushed_since = now;
        else if (now - unflushed_since >= FLUSH_NS && !r->io_rc) {
            io_result(r, ro__traj_writer_flush(&r->w, r->io_err, sizeof r->io_err));
            unflushed_since = 0;
        }
        r->busy_ns += ro__now_ns() - t0;
        recycle(r, list);
    }
    /* Drops after a shard's last chunk: say so in an entry-less record.
     * Every shard is done: the node stopped the workers before finish. */
    for (uint32_t i = 0; i < r->nports && !r->io_rc; i++) {
        if (!r->ports[i].dropped)
            continue;
        Rollout__V1__TransitionBatch b;
        rollout__v1__transition_batch__init(&b);
        b.dropped = r->ports[i].dropped;
        io_result(r, ro__traj_writer_append(&r->w, &b, r->io_err, sizeof r->io_err));
    }
    if (!r->io_rc)
        io_result(r, ro__traj_writer_close(&r->w, r->io_err, sizeof r->io_err));
    else {
        char ignore[64];
        ro__traj_writer_close(&r->w, ignore, sizeof ignore);
    }
    return NULL;
}

int ro__recorder_start(ro_recorder_t *r, char *err, size_t errlen)
{
    int rc = pthread_create(&r->thread, NULL, io_main, r);
    if (rc) {
        snprintf(err, errlen, "cannot start the recorder thread: %s", strerror(rc));
        return RO_ENOMEM;
    }
    pthread_setname_np(r->thread, "ro-recorder");
    r->started = true;
    return 0;
}

int ro__recorder_finish(ro_recorder_t *r, char *err, size_t errlen)
{
    if (r->finished)
        return r->keep_going ? 0 : r->io_rc;
    r->finished = true;
    if (!r->started) {
        char ignore[64];
        ro__traj_writer_close(&r->w, ignore, sizeof ignore);
        return 0;
    }
    ro__mutex_lock(&r->mu);
    r->stop = true;
    ro__mutex_unlock(&r->mu);
    pthread_cond_signal(&r->cv);
    pthread_join(r->thread, NULL);
    if (r->keep_going)
        return 0; /* reported when it happened; the summary counts the loss */
    if (r->io_rc && err)
        snprintf(err, errlen, "recorder: %s; the run was stopped (--record-error stop)", r->io_err);
    return r->io_rc;
}

void ro__recorder_stats(const ro_recorder_t *r, ro_recorder_stats_t *st)
{
    memset(st, 0, sizeof *st);
    /* After finish (the join orders these plain reads), or rough figures. */
    st->transitions = r->transitions;
    st->resets = r->resets;
    st->lost_steps = r->lost_steps;
    st->failed = r->io_rc != 0;
    st->dropped_steps = atomic_load_explicit(&r->dropped_steps, memory_order_relaxed);
    st->waits = atomic_load_explicit(&r->waits, memory_order_relaxed);
    st->snapshots = r->snapshots;
    st->snapshot_failures = atomic_load_explicit(&r->snapshot_failures, memory_order_relaxed);
    st->bytes = r->w.total_bytes;
    st->files = r->w.part + 1;
    st->io_busy_s = (double)r->busy_ns * 1e-9;
}

void ro__recorder_pressure(const ro_recorder_t *r, uint64_t *waits, uint64_t *dropped_steps)
{
    /* Relaxed: statistics, read while the shards move them. */
    *waits = atomic_load_explicit(&r->waits, memory_order_relaxed);
    *dropped_steps = atomic_load_explicit(&r->dropped_steps, memory_order_relaxed);
}

void ro__recorder_free(ro_recorder_t *r)
{
    if (!r)
        return;
    ro__recorder_finish(r, NULL, 0);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    ro__grant_pool_destroy(&r->pool);
    free(r->mem);
    ro__traj_layout_msg_free(&r->layout);
    free(r);
}
