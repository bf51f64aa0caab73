/*
 * The gate: where accepted connections wait for their hello, apart from the
 * peers that said one. Every peer is untrusted until its hello checks out,
 * so until then a connection
 *   - may send one small frame: its length prefix over RO_HELLO_MAX_FRAME is
 *     refused before any of its body is read (nothing large is buffered or
 *     decoded for a stranger);
 *   - holds one of a few slots: when all are taken, the connection that has
 *     waited longest is dropped to make room, so strangers cannot lock out
 *     the learners that come after them, and never count against the
 *     attached ones (--max-learners);
 *   - has a deadline (--hello-timeout).
 * The node's hub and rollout-replay --serve keep one gate each. The gate
 * only keeps the list and the limits; its owner drops the connections it
 * names (with an Error frame and a log line) and calls ro__gate_leave when
 * a connection closes. Loop thread only, like the connections.
 */
#ifndef RO_GATE_H
#define RO_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/conn.h"

/* The largest frame a connection may send before its hello: a Hello with a
 * token of RO_TOKEN_MAX bytes and a name fits many times over. */
#define RO_HELLO_MAX_FRAME 4096u

/* Connections waiting for their hello at once, at least. */
#define RO_GATE_MIN_SLOTS 16u

typedef struct ro_gate {
    ro_ilist_t conns; /* waiting (through their gate_link), in the order they came */
    uint32_t waiting;
    uint32_t slots;       /* most waiting at once */
    uint64_t deadline_ns; /* how long one may wait; 0: no deadline */
} ro_gate_t;

/* ro__gate_init: at most slots connections wait at once (at least
 * RO_GATE_MIN_SLOTS), each for up to hello_timeout_s (0: no limit). */
void ro__gate_init(ro_gate_t *g, uint32_t slots, double hello_timeout_s);

/*
 * ro__gate_admit puts c (just accepted, at now_ns) in the gate and holds it
 * to frames of RO_HELLO_MAX_FRAME bytes. Returns the connection to drop to
 * make room (the one that has waited longest; still in the gate until it
 * closes or leaves), or NULL.
 */
ro_conn_t *ro__gate_admit(ro_gate_t *g, ro_conn_t *c, uint64_t now_ns);

/* ro__gate_pass: c said a valid hello; it leaves the gate and may send
 * frames of up to max_frame bytes from now on. */
void ro__gate_pass(ro_gate_t *g, ro_conn_t *c, size_t max_frame);

/* ro__gate_leave takes c out of the gate (it is closing). Idempotent; c
 * need not be in it. */
void ro__gate_leave(ro_gate_t *g, ro_conn_t *c);

/* ro__gate_first is the connection that has waited longest, or NULL;
 * ro__gate_next the one that came after c (in the gate), or NULL. In the
 * gate's order, e.g. to close every waiting connection. */
ro_conn_t *ro__gate_first(const ro_gate_t *g);
ro_conn_t *ro__gate_next(const ro_conn_t *c);

/* ro__gate_expired returns the waiting connection that has passed its
 * deadline at now_ns and waited longest, or NULL. Connections already
 * closing are skipped (their owner is told by on_closed). */
ro_conn_t *ro__gate_expired(const ro_gate_t *g, uint64_t now_ns);

#endif
