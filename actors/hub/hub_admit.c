/*
 * Who may attach to the hub, and for how long a peer may keep it waiting:
 * the same-host upgrade (docs/protocol.md "Same-host upgrade": a private
 * Unix-domain socket beside the TCP listener, one-use nonces offered over
 * TCP after the hello's checks, and the kernel's word that a peer on that
 * socket shares the node's network namespace and user) and the watchdog over
 * strangers and learners that stopped answering. Loop thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/hub/hub_internal.h"
#include "runtime/clock.h"
#include "runtime/error.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71 /* Linux 5.14; older libc headers lack it */
#endif

/* An offer is good this long: the learner connects at once, in the same
 * handshake; a nonce that leaked later opens nothing. */
#define OFFER_TTL_NS (10ull * 1000000000ull)

/* The network namespace a socket belongs to. An accepted Unix-domain
 * socket belongs to its connecting peer's (af_unix makes it there), so
 * comparing it with our listener's tells the kernel's answer, not the
 * peer's claim. false where the kernel cannot say (before Linux 5.14). */
static bool netns_cookie(int fd, uint64_t *out)
{
    socklen_t len = sizeof *out;
    return getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, out, &len) == 0 && len == sizeof *out;
}

/* Where the private socket's directory goes: the user's runtime directory
 * (owner-only by design) when there is one, else /tmp. */
static const char *runtime_dir(void)
{
    const char *d = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (d && d[0] == '/' && strlen(d) < 60 && stat(d, &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == geteuid())
        return d;
    return "/tmp";
}

void ro__hub_upgrade_open(ro_hub_t *h, ro_listener_cb cb)
{
    if (!h->o.learners || strncmp(h->o.listen, "unix:", 5) == 0) /* trainers; this host already */
        return;
    /* mkdtemp makes it 0700: no other user may reach the socket in it. */
    snprintf(h->up_dir, sizeof h->up_dir, "%s/rollout-node.XXXXXX", runtime_dir());
    if (!mkdtemp(h->up_dir)) {
        fprintf(stderr,
                "rollout-node: warning: no private socket for same-host learners (%s: %s); "
                "they stay on TCP\n",
                h->up_dir, strerror(errno));
        h->up_dir[0] = '\0';
        return;
    }
    char spec[128], err[300];
    snprintf(spec, sizeof spec, "unix:%s/upgrade.sock", h->up_dir);
    if (ro__listener_open(&h->up_listener, h->loop, spec, "the private socket", true,
                          "rollout-node", cb, h, h->up_path, sizeof h->up_path, err,
                          sizeof err) != 0) {
        fprintf(stderr, "rollout-node: warning: %s; same-host learners stay on TCP\n", err);
        uv_run(h->loop, UV_RUN_NOWAIT); /* a handle it made closes */
        rmdir(h->up_dir);
        h->up_dir[0] = '\0';
        return;
    }
    if (!netns_cookie(h->up_listener.fd, &h->up_netns)) {
        fprintf(stderr, "rollout-node: warning: this kernel cannot tell a socket's network "
                        "namespace (SO_NETNS_COOKIE, Linux 5.14); same-host learners stay on "
                        "TCP\n");
        ro__hub_upgrade_close(h);
        return;
    }
    h->up_open = true;
}

void ro__hub_upgrade_close(ro_hub_t *h)
{
    h->up_open = false;
    ro__listener_close(&h->up_listener); /* removes the socket file */
    if (h->up_dir[0] && rmdir(h->up_dir) != 0 && errno != ENOENT)
        fprintf(stderr, "rollout-node: warning: cannot remove %s: %s\n", h->up_dir,
                strerror(errno));
    h->up_dir[0] = '\0';
    memset(h->offers, 0, sizeof h->offers); /* no nonce outlives the socket */
}

int ro__hub_upgrade_offer(ro_session_t *s, const Rollout__V1__Hello *hello, bool trainer)
{
    ro_hub_t *h = s->hub;
    if (!hello->upgrade || trainer || s->conn.local || !h->up_open || s->offered)
        return 0;
    /* A free or expired slot, else the oldest offer gives way (bounded:
     * RO_HUB_OFFERS at once; a learner whose offer went connects again). */
    const uint64_t now = ro__now_ns();
    ro_upgrade_offer_t *slot = &h->offers[0];
    for (unsigned i = 0; i < RO_HUB_OFFERS; i++) {
        ro_upgrade_offer_t *o = &h->offers[i];
        if (!o->live || o->expires_ns < now) {
            slot = o;
            break;
        }
        if (o->expires_ns < slot->expires_ns)
            slot = o;
    }
    if (getrandom(slot->nonce, sizeof slot->nonce, 0) != (ssize_t)sizeof slot->nonce)
        return 0; /* no randomness now: no offer, the learner stays on TCP */
    slot->live = true;
    slot->expires_ns = now + OFFER_TTL_NS;
    Rollout__V1__Upgrade u = ROLLOUT__V1__UPGRADE__INIT;
    u.path = h->up_path + 5; /* "unix:PATH" */
    u.nonce.data = slot->nonce;
    u.nonce.len = sizeof slot->nonce;
    u.node_id = h->node_id;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_UPGRADE;
    f.upgrade = &u;
    s->offered = true;
    h->stats.upgrades_offered++;
    return ro__conn_send(&s->conn, &f) == 0 ? 1 : RO_EIO;
}

/* nonce_taken finds a live offer of this nonce, compares every slot in
 * constant time (the nonce is a secret) and spends the one it finds. */
static bool nonce_taken(ro_hub_t *h, const ProtobufCBinaryData *nonce)
{
    if (nonce->len != RO_HUB_NONCE_BYTES)
        return false;
    const uint64_t now = ro__now_ns();
    ro_upgrade_offer_t *hit = NULL;
    for (unsigned i = 0; i < RO_HUB_OFFERS; i++) {
        ro_upgrade_offer_t *o = &h->offers[i];
        uint8_t diff = 0;
        for (unsigned k = 0; k < RO_HUB_NONCE_BYTES; k++)
            diff |= (uint8_t)(o->nonce[k] ^ nonce->data[k]);
        if (diff == 0 && o->live && o->expires_ns >= now)
            hit = o;
    }
    if (hit)
        memset(hit, 0, sizeof *hit); /* once */
    return hit != NULL;
}

int ro__hub_upgrade_admit(ro_session_t *s, const Rollout__V1__Hello *hello, char *err,
                          size_t errlen)
{
    ro_hub_t *h = s->hub;
    if (!s->via_upgrade) {
        if (hello->upgrade_nonce.len)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "an upgrade nonce is good only on the node's private socket");
        return 0;
    }
    if (!hello->upgrade_nonce.len)
        return ro__errorf(err, errlen, RO_EACCES,
                          "the private socket takes only upgrades from TCP: a hello without "
                          "an upgrade nonce");
    int fd = -1;
    struct ucred cred;
    socklen_t clen = sizeof cred;
    uint64_t netns = 0;
    if (uv_fileno(&s->conn.h.handle, &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || !netns_cookie(fd, &netns))
        return ro__errorf(err, errlen, RO_EACCES,
                          "upgrade refused: the kernel cannot say who "
                          "the peer is");
    if (netns != h->up_netns)
        return ro__errorf(err, errlen, RO_EACCES,
                          "upgrade refused: the peer is in another network namespace, not on "
                          "the node's host as its network goes");
    if (cred.uid != geteuid())
        return ro__errorf(err, errlen, RO_EACCES,
                          "upgrade refused: the peer runs as uid %u, the node as %u",
                          (unsigned)cred.uid, (unsigned)geteuid());
    if (!nonce_taken(h, &hello->upgrade_nonce))
        return ro__errorf(err, errlen, RO_EACCES,
                          "upgrade refused: no upgrade was offered with this nonce (each is "
                          "good once, for 10 s, on the node that offered it)");
    h->stats.upgrades++;
    return 0;
}

/* A learner that leaves its oldest batch unanswered for learner_timeout_s
 * has stopped reading or is stuck: its envs go to the others. Strangers
 * leave the gate after hello_timeout_s. */
static void on_watchdog(uv_timer_t *t)
{
    ro_hub_t *h = t->data;
    uint64_t now = ro__now_ns(), limit = (uint64_t)(h->o.learner_timeout_s * 1e9);
    char msg[160];
    for (ro_conn_t *c; (c = ro__gate_expired(&h->gate, now));) {
        h->stats.timed_out++;
        snprintf(msg, sizeof msg, "no hello within %.1f s", h->o.hello_timeout_s);
        h->fail(c->o.owner, RO_EPROTO, msg);
    }
    ro_session_t *s = h->sessions;
    while (s) {
        ro_session_t *next = s->next;
        uint64_t sent =
            h->segs ? ro__sflow_oldest_sent_ns(&s->sflow) : ro__flow_oldest_sent_ns(&s->flow);
        if (limit && s->attached && sent && sent + limit < now) {
            /* sent may be later than now: closing one learner sends its
             * batches to another during this loop. ETIMEDOUT, not EPROTO: a
             * learner may come back (rollout-learner reconnects after this
             * one, not after a protocol error). */
            h->stats.timed_out++;
            snprintf(msg, sizeof msg, "no %s for %.1f s, its envs move to other learners",
                     h->segs ? "segment ack" : "actions", (double)(now - sent) * 1e-9);
            h->fail(s, RO_ETIMEDOUT, msg);
        }
        s = next;
    }
}

void ro__hub_start_watchdog(ro_hub_t *h)
{
    /* It looks 4 times per timeout (the shorter one). */
    double period_s = 0;
    if (h->o.learner_timeout_s > 0)
        period_s = h->o.learner_timeout_s / 4;
    if (h->o.hello_timeout_s > 0 && (period_s == 0 || h->o.hello_timeout_s / 4 < period_s))
        period_s = h->o.hello_timeout_s / 4;
    if (period_s > 0) {
        uint64_t ms = (uint64_t)(period_s * 1000.0);
        uv_timer_start(&h->watchdog, on_watchdog, ms ? ms : 1, ms ? ms : 1);
    }
}
