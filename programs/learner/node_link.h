/*
 * rollout-learner's link to one node: connect (resolving its name),
 * hello, welcome, frames, goodbye, and reconnecting to a node whose
 * connection was lost. What the frames mean is the learner's business: the
 * link reports through ro_link_ops_t and never calls into the learner.
 *
 * A connection's life: attempt (resolve, connect, hello) -> welcomed ->
 * closed. A close is final after the node's goodbye, an error the learner
 * found, an error the node sent (except its learner timeout, ETIMEDOUT),
 * the learner stopping, or a first connection that fails for any reason
 * but a refusal. Any other close of a welcomed connection (EOF, reset,
 * keepalive or user timeout, the node timing us out) starts reconnect
 * attempts with backoff, for up to reconnect_s seconds without a
 * connection; so does a first connection refused (a node still starting:
 * a learner may be started first), for up to reconnect_s from the start.
 *
 * Loop thread only.
 */
#ifndef RO_NODE_LINK_H
#define RO_NODE_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "runtime/shared_mem.h"
#include "wire/addr.h"
#include "wire/conn.h"
#include "wire/pb_alloc.h"

typedef struct ro_link ro_link_t;

typedef struct ro_link_ops {
    /* A welcome: 0 to go on, or a negative code with one line in err (the
     * link then fails: an error frame, a final close). */
    int (*on_welcome)(ro_link_t *l, const Rollout__V1__Welcome *w, char *err, size_t errlen);
    /* Any other frame of a welcomed connection but goodbye and error: set
     * *keep to keep it (free it with ro__frame_free(&l->alloc, f)). */
    void (*on_frame)(ro_link_t *l, ro_frame_t *f, bool *keep);
    /* Optional: a welcomed connection's frame bytes, before decoding (valid
     * during the call); true if handled in place (stream segments). */
    bool (*on_raw)(ro_link_t *l, const uint8_t *body, size_t len);
    /* The connection of generation l->gen closed: what came on it is void.
     * Then l->done tells whether the link is over (else it reconnects). */
    void (*on_down)(ro_link_t *l);
} ro_link_ops_t;

typedef struct ro_link_opts {
    const ro_link_ops_t *ops;
    void *owner;
    int index;         /* in the learner's --connect list */
    const char *addr;  /* "HOST:PORT" as given */
    const char *role;  /* "learner" or "trainer" */
    const char *token; /* "" for none */
    const char *name;  /* for the node's logs */
    size_t max_frame;
    double reconnect_s; /* 0: never reconnect */
    bool quiet;
    /* Ask a node on this host (unix:PATH) for its memory, where this
     * process may map it: stream segments, SEED observations and actions
     * (protocol.md). */
    bool shared_memory;
    /* With shared_memory, SEED: take frames from the node's frame ring
     * while awake (protocol.md "Frames in a ring"). */
    bool seed_ring;
    /* Over TCP: ask the node for its private socket, and move there if
     * the node offers it (protocol.md "Same-host upgrade"). */
    bool upgrade;
} ro_link_opts_t;

struct ro_link {
    ro_conn_t conn;   /* re-opened for every attempt */
    uv_timer_t retry; /* backoff before an attempt, then that attempt's deadline */
    uv_loop_t *loop;
    ro_link_opts_t o;
    ro_addr_t where;
    ro_pb_alloc_t alloc; /* decodes every frame of every connection of the link */
    bool connected, welcomed, failed;
    bool final;       /* no reconnect after this close: a goodbye or an error */
    bool attached;    /* welcomed at least once: reconnects only after that */
    bool early;       /* refused before the first welcome: waiting for the node to start */
    bool waiting;     /* between attempts: the retry timer is armed */
    bool done;        /* over: no more connections */
    bool stopping;    /* ro__link_stop was called */
    uint32_t gen;     /* bumped per connection */
    uint64_t lost_ns; /* when the last welcomed connection ended; 0 while it lasts */
    uint32_t attempts, backoff_ms;
    uint64_t reconnects; /* welcomes after the first */
    uint64_t node_id;    /* from the last welcome */
    /* The last connection's goodbye said the env steps its answers made
     * (SEED, a node that stopped): goodbye_steps; for on_down. */
    bool has_goodbye_steps;
    uint64_t goodbye_steps;
    bool shared; /* a Unix-domain connection on which we asked for the node's memory */
    /* The same-host upgrade: asked (this TCP hello said upgrade), offered
     * (the node answered with an Upgrade: this connection closes and the
     * next attempt goes to up_where with its nonce), upgrading (that
     * attempt), upgraded (its welcome came: the connection is the node's
     * private socket), upgrade_failed (an attempt failed: this link stays
     * on TCP, saying so once). */
    bool asked, offered, upgrading, upgraded, upgrade_failed;
    ro_addr_t up_where;
    uint8_t nonce[16];
    uint64_t up_node_id;
    /* During on_welcome only: the descriptors that came with the welcome
     * (SCM_RIGHTS), which the welcome's memories name by place; closed
     * after it (the mappings keep the memory). */
    int fds[RO_SHARED_FDS_MAX];
    unsigned nfds;
    char why[400];       /* why the connection (or attempt) closed */
    char last_fail[400]; /* last logged attempt failure: log again when it changes */
};

/* ro__link_start parses the address, prepares the link's handles and makes
 * the first attempt. Returns 0, or RO_EINVAL with one line in err (a bad
 * address: nothing started). Loop thread, before or while the loop runs. */
int ro__link_start(ro_link_t *l, uv_loop_t *loop, const ro_link_opts_t *o, char *err,
                   size_t errlen);

/* ro__link_send queues a frame on the current connection; 0 or a negative
 * code (not connected, closing, out of memory). */
int ro__link_send(ro_link_t *l, const ro_frame_t *f);

/* ro__link_fail: the node broke the protocol (a bad frame): an Error frame,
 * a log line, a final close. */
__attribute__((format(printf, 2, 3))) void ro__link_fail(ro_link_t *l, const char *fmt, ...);

/* ro__link_close closes the current connection; final: no reconnect. */
void ro__link_close(ro_link_t *l, const char *why, bool final);

/* ro__link_stop says goodbye (reason) if welcomed and closes for good;
 * a link between attempts is over at once. on_down follows either way. */
void ro__link_stop(ro_link_t *l, const char *reason);

/* ro__link_release closes the retry timer of a link that is done. */
void ro__link_release(ro_link_t *l);

#endif
