/*
 * Dead-link detection for the protocol's TCP connections, both ends (the
 * node's learner sessions, rollout-learner's node connections).
 *
 * Keepalive probes start after 2 s without traffic and repeat every 1 s;
 * TCP_USER_TIMEOUT closes the connection once sent data (a probe included)
 * has gone unacknowledged for 5 s. Either way a cut link is closed, with
 * ETIMEDOUT on the next read, about 5 s after it went quiet, instead of the
 * kernel's defaults (2 h of keepalive silence, ~15 min of retransmissions).
 */
#ifndef RO_TCP_LIVENESS_H
#define RO_TCP_LIVENESS_H

#include <uv.h>

#define RO_KEEPALIVE_IDLE_S 2
#define RO_KEEPALIVE_INTVL_S 1
#define RO_KEEPALIVE_CNT 3
#define RO_USER_TIMEOUT_MS 5000

/* ro__tcp_liveness sets the above on a connected tcp handle. Returns 0, or
 * a negative errno (the connection still works, without the bounds). */
int ro__tcp_liveness(uv_tcp_t *tcp);

#endif
