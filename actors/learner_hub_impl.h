/*
 * The remote-learner hub's insides, shared by its two files:
 * remote_learner.c (env ownership, batching, the actor, set-up) and
 * learner_session.c (one learner connection: frames in and out). Loop
 * thread only, like everything in them.
 */
#ifndef RO_REMOTE_LEARNER_IMPL_H
#define RO_REMOTE_LEARNER_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "actors/learner_hub.h"
#include "wire/frame.h"

/* Bytes a session may have queued for writing before we call its learner a
 * slow consumer and close it: it has stopped reading. */
#define MAX_QUEUED_BYTES (64u << 20)
#define READ_CHUNK 65536

typedef struct ro_session ro_session_t;

/* One Observations frame awaiting its Actions. Pool-allocated: a batch holds
 * at least one shard, so there are never more batches than shards. */
typedef struct sent_batch {
    uint64_t seq;
    uint64_t sent_ns; /* for the learner timeout */
    uint32_t rows;
    ro_env_shard_t *shards; /* linked through ready_next */
    struct sent_batch *next;
} sent_batch_t;

struct ro_session {
    uv_tcp_t tcp;
    ro_remote_t *hub;
    ro_frame_reader_t rd;
    bool attached; /* hello accepted */
    bool trainer;  /* role "trainer": pushes policies, holds no envs */
    bool closing;
    uint64_t accepted_ns; /* for the hello timeout */
    char peer[64];
    char name[64];
    ro_env_shard_t *pending_head, **pending_tail; /* ready, not yet sent */
    uint32_t pending_rows;
    uint64_t first_pending_ns;
    uint32_t owned_rows; /* envs of the active shards it owns */
    uint32_t owned_shards;
    sent_batch_t *inflight_head, **inflight_tail;
    uint32_t inflight_rows;
    uint64_t next_seq;
    ro_session_t *next; /* hub's list */
    char rbuf[READ_CHUNK];
};

struct ro_remote {
    /* Loop thread only. */
    ro_actor_t actor;
    uv_async_t async;
    uv_loop_t *loop;
    uv_tcp_t server;
    uv_timer_t timer;    /* max-wait of partial batches */
    uv_timer_t watchdog; /* learners that stopped answering */
    ro_actor_t *control;
    ro_msg_t done_msg;
    ro_remote_opts_t o;
    char token[256];
    bool has_token;
    char addr[80];

    ro_env_shard_t *shards;
    uint32_t nshards;
    uint32_t num_envs;
    uint32_t obs_dim, act_dim;
    bool discrete;
    const ro_space_t *obs_space, *act_space;

    ro_session_t **owner; /* [nshards] */
    bool *active;         /* [nshards] not yet done */
    uint32_t active_shards;
    ro_env_shard_t *orphan_head, **orphan_tail; /* ready, no learner */

    ro_session_t *sessions;
    uint32_t nsessions; /* attached ones */
    uint32_t nconns;    /* all open connections */

    sent_batch_t *pool; /* [nshards] */
    sent_batch_t *free_batches;

    /* Scratch for encoding one Observations frame. */
    uint32_t *s_env;
    uint64_t *s_step;
    float *s_obs, *s_reward, *s_final;
    protobuf_c_boolean *s_term, *s_trunc, *s_start;
    uint32_t *s_final_idx;
    uint32_t max_rows;

    uint64_t node_id;
    bool stopping;
    bool timer_armed;
    ro_remote_stats_t stats;
};

static inline uint32_t shard_index(const ro_remote_t *h, const ro_env_shard_t *s)
{
    return (uint32_t)(s - h->shards);
}

/* learner_session.c: one connection. */
__attribute__((format(printf, 2, 3))) void ro__session_log(const ro_session_t *s, const char *fmt,
                                                           ...);
/* ro__session_send encodes and queues a frame; a negative code means the
 * caller should close the session. */
int ro__session_send(ro_session_t *s, const ro_frame_t *f);
/* ro__session_fail: an error frame, a log line, the close. */
__attribute__((format(printf, 3, 4))) void ro__session_fail(ro_session_t *s, int code,
                                                            const char *fmt, ...);
/* ro__session_close closes a session and gives its envs to the others. */
void ro__session_close(ro_session_t *s);
/* ro__session_accept is the listener's connection callback. */
void ro__session_accept(uv_stream_t *server, int status);

/* remote_learner.c: who holds which env. */
void ro__hub_route(ro_remote_t *h, ro_env_shard_t *sh);
void ro__hub_set_owner(ro_remote_t *h, ro_env_shard_t *sh, ro_session_t *to);
void ro__hub_adopt_orphans(ro_remote_t *h);
void ro__hub_stop_shard(ro_env_shard_t *sh);

#endif
