/*
 * The recorder: writes every transition of the node's envs to a trajectory
 * file (trajectory/writer.h, docs/replay.md), off the critical path: an ABI
 * 1 env's as format version 1, an env ABI 2 env's as version 2 (rows of
 * agents, typed tensors, composite actions, the mask; recorder_chunk.h).
 *
 * Env actors copy each step of their shard into a chunk taken from a
 * bounded pool and hand it over (ro__recorder_capture); one I/O thread,
 * owned by the recorder, encodes the chunks, writes them and puts them
 * back. When the pool is empty, --record-full=block (the default) makes the
 * shard wait without blocking its worker: the shard does not report to its
 * learner until the I/O thread grants it a chunk with RO_MSG_RECORD_RESUME.
 * --record-full=drop counts the lost shard step instead.
 *
 * When a write fails (disk full, I/O error) the file is cut back to its
 * last whole record and nothing more is written. --record-error=stop (the
 * default) tells the node to stop the run; --record-error=continue lets it
 * go on unrecorded. Either way the steps not recorded are counted.
 */
#ifndef RO_RECORDER_ACTOR_H
#define RO_RECORDER_ACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/recorder/recorder_port.h"
#include "rollout/env.h"

struct ro_space_layout;

typedef struct ro_recorder_opts {
    const char *path;
    uint64_t max_bytes;             /* rotate files at this size; 0 = never */
    bool drop;                      /* --record-full=drop */
    bool keep_going;                /* --record-error=continue */
    ro_actor_t *on_error;           /* sent RO_MSG_RECORD_FAILED on a write error (stop), or NULL */
    uint32_t chunks;                /* pool size; 0 = automatic */
    const struct ro_env_kind *kind; /* the env (its name; its state functions) */
    /* Env ABI 2: the env's layout (format version 2: rows of typed
     * tensors), or NULL for ABI 1 (version 1, the fields below). */
    const struct ro_space_layout *layout;
    const char *env_spec; /* as given to --env */
    const ro_env_arg_t *env_args;
    size_t nenv_args;
    uint32_t max_episode_steps;
    uint64_t seed;       /* the run seed (drawn or --seed) */
    uint32_t node_index; /* --node-index: with seed, what env i's seeds derive from */
    uint32_t num_envs;
    const char *policy;
    bool check_finite;
    const char *mujoco_version; /* a MuJoCo env's MuJoCo ("4.0.0"), or NULL */
    uint32_t obs_dim, act_dim;
    bool discrete;
    uint32_t nshards;
    uint32_t max_shard; /* envs in the largest shard */
    /* --snapshot-every K (format version 3, docs/replay.md "Snapshots"):
     * every env's state after every K of its steps, saved on the shard's
     * thread through kind (envs/env_state.h); 0: none. probe: an instance
     * of the kind (made with env_args), which sizes the states: every
     * instance made with the same args has the size (each save is checked);
     * ro__recorder_new reads it on the calling thread (before the workers
     * start, the main thread owns every env). */
    uint32_t snapshot_every;
    void *probe;
} ro_recorder_opts_t;

typedef struct ro_recorder_stats {
    uint64_t transitions;   /* step entries written */
    uint64_t resets;        /* reset entries written */
    uint64_t dropped_steps; /* env steps lost with --record-full=drop */
    uint64_t lost_steps;    /* env steps not recorded because a write failed */
    bool failed;            /* a write failed */
    uint64_t bytes;         /* over every file */
    uint32_t files;
    uint64_t snapshots;         /* env states written */
    uint64_t snapshot_failures; /* states an env could not save (not written) */
    uint64_t waits;             /* times a shard waited for a chunk */
    double io_busy_s;           /* seconds the I/O thread spent encoding and writing */
} ro_recorder_stats_t;

/* ro__recorder_new creates the first file, writes its header and allocates
 * the chunk pool and one port per shard. Main thread. On failure returns a
 * negative code with one line in err. */
int ro__recorder_new(ro_recorder_t **out, const ro_recorder_opts_t *o, char *err, size_t errlen);

/* ro__recorder_port returns shard i's port, bound to its step batch b and
 * its envs (saved from for snapshots). Main thread, before the recorder
 * starts. */
ro_rec_port_t *ro__recorder_port(ro_recorder_t *r, uint32_t i, const struct ro_step_batch *b,
                                 void *const *envs);

/* ro__recorder_start starts the I/O thread. Main thread, once. */
int ro__recorder_start(ro_recorder_t *r, char *err, size_t errlen);

/*
 * ro__recorder_capture records the step (or, with start, the reset) the
 * shard just took. Returns true if the shard may report to its learner;
 * false if it must wait for RO_MSG_RECORD_RESUME and then call
 * ro__recorder_resume. Thread running the shard.
 */
bool ro__recorder_capture(ro_rec_port_t *p, bool start);

/* ro__recorder_resume records the capture that waited. Thread running the
 * shard, on RO_MSG_RECORD_RESUME. */
void ro__recorder_resume(ro_rec_port_t *p);

/*
 * ro__recorder_finish waits until the I/O thread has written every chunk
 * handed to it, closes the file and joins the thread. Call after every
 * shard has sent its last step. Main (loop) thread. Returns 0, or the first
 * write error with its message in err (0 with --record-error=continue,
 * which reported it when it happened).
 */
int ro__recorder_finish(ro_recorder_t *r, char *err, size_t errlen);

/* ro__recorder_stats fills st (after finish for final figures). */
void ro__recorder_stats(const ro_recorder_t *r, ro_recorder_stats_t *st);

/* ro__recorder_pressure reads, while the run goes on, what a full pool
 * does: shard steps that waited for a chunk and env steps dropped (the
 * throughput lines show them). Any thread. */
void ro__recorder_pressure(const ro_recorder_t *r, uint64_t *waits, uint64_t *dropped_steps);

/* ro__recorder_free finishes if needed and frees everything. */
void ro__recorder_free(ro_recorder_t *r);

#endif
