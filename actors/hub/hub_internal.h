/*
 * The remote-learner hub's insides, shared by learner_hub.c (the actor,
 * sessions, frames, routing) and hub_state.c (bookkeeping that calls
 * nothing of the hub: ownership counts, the welcome, statistics). Loop
 * thread only, like everything of the hub.
 */
#ifndef RO_HUB_INTERNAL_H
#define RO_HUB_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "actors/exchange/step_batch.h"
#include "actors/hub/hub_types.h"
#include "actors/hub/obs_codec.h"
#include "actors/stream/segment.h"
#include "actors/hub/session_flow.h"
#include "actors/stream/stream_flow.h"
#include "runtime/loop_spin.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "wire/gate.h"
#include "wire/listener.h"
#include "wire/pb_alloc.h"
#include "wire/seed_memory.h"

struct ro_session;

/* Same-host upgrades offered at once (hub_admit.c): more, and the oldest
 * offer gives way. */
#define RO_HUB_OFFERS 16
#define RO_HUB_NONCE_BYTES 16

/* One upgrade offered over TCP: its nonce, good once, until expires_ns. */
typedef struct ro_upgrade_offer {
    uint8_t nonce[RO_HUB_NONCE_BYTES];
    uint64_t expires_ns;
    bool live;
} ro_upgrade_offer_t;
/* An answer taken from a session's ring (bad NULL), or why its ring is not
 * to be believed (a NULL). */
typedef void (*ro_hub_answer_fn)(struct ro_session *s, const Rollout__V1__Actions *a,
                                 const char *bad);

typedef struct ro_session {
    ro_conn_t conn;
    ro_hub_t *hub;
    ro_flow_t flow;   /* seed mode: its step batches */
    ro_sflow_t sflow; /* stream mode: its segments */
    bool attached;    /* hello accepted */
    bool trainer;     /* role "trainer": pushes policies, holds no envs */
    bool listed;      /* in the hub's list (until it starts closing) */
    uint64_t accepted_ns;
    uint64_t pushed_version;  /* the version of its last accepted policy push */
    ro_shared_mem_t act_mem;  /* SEED on this host: the actions its learner writes (flow.act_mem) */
    ro_shared_mem_t ring_mem; /* SEED on this host, Hello.seed_ring: the rings (flow.rings) */
    uint64_t answers_tail;    /* answers taken from its ring */
    uint64_t answered_steps;  /* SEED: env steps taken with its answers (its goodbye says) */
    bool answers_asleep;      /* its answer ring marked asleep by us, not yet woken */
    bool via_upgrade;         /* accepted on the private socket (hub_admit.c) */
    bool offered;             /* TCP: its hello was answered with an Upgrade */
    bool state_refused;       /* a get_state or set_state of it was refused (logged once) */
    struct ro_session *next;
} ro_session_t;

struct ro_hub {
    /* Loop thread only. */
    ro_actor_t actor;
    ro_loop_home_t home; /* the hub actor's, on the loop */
    uv_loop_t *loop;
    ro_listener_t listener;
    /* The same-host upgrade (hub_admit.c): the private socket in an
     * owner-only directory, its network namespace, the offers. */
    ro_listener_t up_listener;
    bool up_open;
    char up_dir[80];
    char up_path[120]; /* "unix:DIR/upgrade.sock" */
    uint64_t up_netns;
    ro_upgrade_offer_t offers[RO_HUB_OFFERS];
    uv_timer_t timer;    /* max-wait of partial batches */
    uv_timer_t watchdog; /* learners that stopped answering */
    ro_actor_t *control;
    ro_msg_t done_msg;
    ro_hub_opts_t o;
    char token[256];
    bool has_token;
    char addr[80];

    ro_step_batch_t *const *batches; /* [nshards], batches[i]->index == i */
    uint32_t nshards;
    uint32_t num_envs;
    const ro_space_t *obs_space, *act_space;

    ro_session_t **owner; /* [nshards] */
    bool *active;         /* [nshards] not yet done */
    uint32_t active_shards;
    ro_batch_item_t *orphan_head, **orphan_tail; /* ready, no learner */

    ro_session_t *sessions;
    uint32_t nsessions;       /* attached learners */
    uint32_t nattached;       /* attached learners and trainers: at most max_learners */
    ro_gate_t gate;           /* connections that have not said hello (wire/gate.h) */
    ro_frame_budget_t budget; /* frames being received: 2 x max_frame, all connections */

    ro_sent_batch_t *pool; /* [nshards]: no more frames than shards are ever in flight */
    ro_sent_batch_t *free_batches;
    ro_obs_encoder_t enc;
    ro_pb_alloc_t alloc; /* decodes every session's frames (each is freed at once) */
    /* SEED mode, learners on this host (wire/seed_memory.h): the
     * observation memory every such session's frames put their columns
     * in, made at the first hello that asks for it. */
    ro_shared_mem_t seed_obs;
    ro_seed_mem_layout_t seed_lay;
    bool seed_mem_failed; /* no memfd here: frames carry the columns */

    /* Stream mode (ro__hub_stream): the learners get segments; step
     * batches go to local lanes and never come here. */
    ro_seg_pool_t *segs; /* NULL in seed mode */
    uint32_t unroll, window, max_lag;
    uint64_t version_now; /* newest policy: the node's at start, then the last push accepted */
    ro_segment_t *seg_orphans, **seg_orphan_tail; /* ready, no learner */
    bool done_sent;
    ro_sflow_stats_t sst;

    ro_loop_spin_t spin; /* SEED: the loop polls while actions are due */
    /* SEED learners' answer rings (hub_ring.c): taken after each turn,
     * marked asleep before the loop may block; answers go to on_answer. */
    uv_prepare_t ring_prepare;
    uv_check_t ring_check;
    uv_idle_t ring_kick; /* one more turn without blocking */
    ro_hub_answer_fn on_answer;
    /* learner_hub.c's: a peer broke the rules or stalled: an Error frame
     * with code and msg, a log line, the session closed (hub_admit.c's
     * watchdog calls it). */
    void (*fail)(struct ro_session *s, int code, const char *msg);

    uint64_t node_id;
    bool stopping;
    bool timer_armed;
    ro_hub_stats_t stats;
};

/* hub_admit.c */
/* ro__hub_upgrade_open opens the private Unix-domain socket beside a TCP
 * listener, in a new owner-only directory, accepting with cb; where it
 * cannot (no directory, a kernel that cannot tell network namespaces) it
 * says so once and learners stay on TCP. */
void ro__hub_upgrade_open(ro_hub_t *h, ro_listener_cb cb);
/* ro__hub_upgrade_close closes it, removes the socket and its directory,
 * forgets every offer. Idempotent. */
void ro__hub_upgrade_close(ro_hub_t *h);
/* ro__hub_upgrade_offer answers a checked TCP hello that asks for the
 * upgrade with an Upgrade frame (path, a new nonce, node id) instead of a
 * welcome. 1: offered (the learner goes on elsewhere); 0: not offered
 * (welcome it); RO_EIO: the send failed. */
int ro__hub_upgrade_offer(ro_session_t *s, const Rollout__V1__Hello *hello, bool trainer);
/* ro__hub_upgrade_admit checks a hello's upgrade fields: on the private
 * socket, a live nonce (spent now), a peer in the node's network namespace
 * and of its user; elsewhere no nonce. 0, or a code with one line in err. */
int ro__hub_upgrade_admit(ro_session_t *s, const Rollout__V1__Hello *hello, char *err,
                          size_t errlen);
/* ro__hub_start_watchdog closes strangers after hello_timeout_s and
 * learners that leave a batch unanswered for learner_timeout_s. */
void ro__hub_start_watchdog(ro_hub_t *h);

/* hub_reseed.c */
/* How the hub fails a session that broke a rule: error frame, log, close. */
typedef void (*ro_hub_fail_fn)(ro_session_t *s, int code, const char *fmt, ...);
/* ro__hub_reseed resets, instead of stepping, the envs of every frame
 * awaiting learner s's answer (Frame{reseed}), or fails s naming why not. */
void ro__hub_reseed(ro_session_t *s, const Rollout__V1__Reseed *r, ro_hub_fail_fn fail);

/* hub_env_state.c */
/* ro__hub_env_state answers a learner's Frame{get_state} or
 * Frame{set_state} with Frame{env_states}, or fails s when the frame
 * breaks the protocol. */
void ro__hub_env_state(ro_session_t *s, const Rollout__V1__Frame *f, ro_hub_fail_fn fail);

#endif
