#include "learner/node_link.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/text.h"
#include "wire/checks.h"
#include "wire/frame.h"

/* Reconnects: 100 ms after the loss, doubling to 2 s between attempts; an
 * attempt that has no welcome after 5 s is abandoned. */
#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 2000
#define ATTEMPT_TIMEOUT_MS 5000
/* Failed attempts logged: the first, every 10th, and any with a new reason. */
#define LOG_EVERY 10

__attribute__((format(printf, 2, 3))) static void say(const ro_link_t *l, const char *fmt, ...)
{
    char msg[512], shown[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* msg may hold a node's words (its error message, its env's name): one
     * line, no terminal escapes. */
    fprintf(stderr, "rollout-learner: node %s: %s\n", l->o.addr,
            ro__text_log(shown, sizeof shown, msg, sizeof msg));
}

static void attempt(ro_link_t *l);

static void on_retry(uv_timer_t *t)
{
    ro_link_t *l = t->data;
    l->waiting = false;
    attempt(l);
}

/* Wait before the next attempt: the backoff doubles up to its cap. */
static void schedule_retry(ro_link_t *l)
{
    uint32_t ms = l->backoff_ms;
    l->backoff_ms = ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : ms * 2;
    l->waiting = true;
    uv_timer_start(&l->retry, on_retry, ms, 0);
}

/* The same-host upgrade (protocol.md): after the node's Upgrade, the
 * TCP connection closed and the next attempt goes to its private socket;
 * after that attempt failed (before a welcome), the one after goes back to
 * TCP without asking again. Either at once: no backoff, no loss to report.
 * Returns false when the close was not one of those. */
static bool upgrade_next(ro_link_t *l)
{
    if (l->stopping || !(l->offered || (l->upgrading && !l->welcomed)))
        return false;
    l->connected = l->welcomed = false;
    if (l->offered) {
        l->offered = false;
        l->upgrading = true;
    } else {
        l->upgrading = false;
        l->upgrade_failed = true;
        say(l, "staying on TCP: the node's private socket %s: %s", l->up_where.host, l->why);
    }
    attempt(l);
    return true;
}

/* An attempt or a connection is over (l->why says why): try again, give
 * up, or be done with the node. */
static void ended(ro_link_t *l)
{
    if (upgrade_next(l))
        return;
    bool was_welcomed = l->welcomed;
    l->connected = l->welcomed = false;
    bool retry = !l->final && !l->stopping && (l->attached || l->early) && l->o.reconnect_s > 0;
    if (retry && was_welcomed) {
        /* A session was lost: first attempt soon. */
        l->lost_ns = ro__now_ns();
        l->attempts = 0;
        l->backoff_ms = RECONNECT_MIN_MS;
        l->last_fail[0] = '\0';
        say(l, "connection lost (%s); reconnecting for up to %g s", l->why, l->o.reconnect_s);
        schedule_retry(l);
        l->o.ops->on_down(l);
        return;
    }
    if (retry) {
        l->attempts++;
        double down = (double)(ro__now_ns() - l->lost_ns) * 1e-9;
        if (down < l->o.reconnect_s) {
            if (!l->attached) { /* the node is not up yet: said once */
                if (l->attempts == 1)
                    say(l,
                        "not accepting connections yet (%s); retrying for up to %g s "
                        "(--reconnect-s)",
                        l->why, l->o.reconnect_s);
            } else if (l->attempts == 1 || l->attempts % LOG_EVERY == 0 ||
                       strcmp(l->why, l->last_fail)) {
                say(l,
                    "reconnect attempt %u failed (%s); %.1f s without a connection, retrying "
                    "every %.1f s at most",
                    l->attempts, l->why, down, RECONNECT_MAX_MS / 1000.0);
                snprintf(l->last_fail, sizeof l->last_fail, "%s", l->why);
            }
            schedule_retry(l);
            l->o.ops->on_down(l);
            return;
        }
        say(l,
            "no connection for %.1f s (%u attempts, last: %s); giving up on it (--reconnect-s %g)",
            down, l->attempts, l->why, l->o.reconnect_s);
        l->failed = true;
    } else if (!l->o.quiet || l->failed) {
        say(l, "%s", l->why);
    }
    l->done = true;
    l->o.ops->on_down(l);
}

static void on_closed(ro_conn_t *c)
{
    ro_link_t *l = c->o.owner;
    uv_timer_stop(&l->retry); /* the attempt's deadline */
    if (c->broken)            /* the node's bytes were not frames: a protocol error */
        l->failed = l->final = true;
    if (!l->why[0])
        snprintf(l->why, sizeof l->why, "%s", c->why[0] ? c->why : "disconnected");
    ended(l);
}

void ro__link_close(ro_link_t *l, const char *why, bool final)
{
    if (l->conn.closing || !l->conn.open)
        return;
    l->final |= final;
    snprintf(l->why, sizeof l->why, "%s", why);
    ro__conn_close(&l->conn, why);
}

void ro__link_fail(ro_link_t *l, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (l->conn.closing || !l->conn.open)
        return;
    Rollout__V1__Error e = ROLLOUT__V1__ERROR__INIT;
    e.code = (uint32_t)EPROTO;
    e.message = msg;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ERROR;
    f.error = &e;
    ro__conn_send(&l->conn, &f);
    l->failed = true;
    ro__link_close(l, msg, true);
}

int ro__link_send(ro_link_t *l, const ro_frame_t *f)
{
    if (!l->connected)
        return RO_EIO;
    return ro__conn_send(&l->conn, f);
}

void ro__link_stop(ro_link_t *l, const char *reason)
{
    if (l->done || l->stopping)
        return;
    l->stopping = true;
    if (l->waiting) { /* between two attempts: nothing to close */
        uv_timer_stop(&l->retry);
        l->waiting = false;
        l->done = true;
        l->o.ops->on_down(l);
        return;
    }
    if (l->welcomed)
        ro__conn_goodbye(&l->conn, reason, NULL);
    ro__link_close(l, reason, true);
}

/* The node's Upgrade (answering a TCP hello that asked for it): checked,
 * kept, and this connection closed; ended() goes on to the path. */
static void on_upgrade(ro_link_t *l, const Rollout__V1__Upgrade *u)
{
    char err[300];
    if (!l->asked) {
        ro__link_fail(l, "an upgrade we did not ask for");
        return;
    }
    if (ro__check_upgrade(u, err, sizeof err) != 0) {
        ro__link_fail(l, "%s", err);
        return;
    }
    snprintf(l->up_where.host, sizeof l->up_where.host, "%s", u->path); /* checked: fits */
    l->up_where.port = -1;
    memcpy(l->nonce, u->nonce.data, sizeof l->nonce);
    l->up_node_id = u->node_id;
    l->offered = true;
    ro__link_close(l, "moving to the node's private socket", false);
}

/* Frames before the welcome. */
static void on_greeting(ro_link_t *l, ro_frame_t *f)
{
    char err[256];
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_UPGRADE && f->upgrade) {
        on_upgrade(l, f->upgrade);
        return;
    }
    if (l->upgrading && f->body_case == ROLLOUT__V1__FRAME__BODY_WELCOME && f->welcome &&
        f->welcome->node_id != l->up_node_id) {
        /* Not the node that offered it: whoever answers there gets nothing
         * of ours but what the hello said; we go back to TCP. */
        snprintf(err, sizeof err, "welcomed by node id %016llx, not %016llx: not its socket",
                 (unsigned long long)f->welcome->node_id, (unsigned long long)l->up_node_id);
        ro__link_close(l, err, false);
        return;
    }
    if (l->upgrading && f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR && f->error) {
        snprintf(err, sizeof err, "refused: %.200s", f->error->message ? f->error->message : "");
        ro__link_close(l, err, false); /* back to TCP (ended) */
        return;
    }
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_WELCOME && f->welcome) {
        l->nfds = ro__conn_take_fds(&l->conn, l->fds, RO_SHARED_FDS_MAX);
        int rc = l->o.ops->on_welcome(l, f->welcome, err, sizeof err);
        for (unsigned i = 0; i < l->nfds; i++)
            close(l->fds[i]);
        l->nfds = 0;
        if (rc || l->stopping) {
            if (rc)
                ro__link_fail(l, "%s", err);
            return;
        }
        const Rollout__V1__Welcome *w = f->welcome;
        l->welcomed = true;
        l->has_goodbye_steps = false;
        l->upgraded = l->upgrading;
        if (l->upgrading && !l->o.quiet && !l->attached)
            say(l,
                "on this host: moved from TCP to unix:%s, shared memory (--no-upgrade stays "
                "on TCP)",
                l->up_where.host);
        l->upgrading = false;
        if (l->early && !l->attached) {
            uv_timer_stop(&l->retry); /* the attempt's deadline */
            say(l, "connected after %.1f s (attempt %u)",
                (double)(ro__now_ns() - l->lost_ns) * 1e-9, l->attempts + 1);
            l->early = false;
            l->attempts = 0;
            l->lost_ns = 0;
        }
        if (l->attached) {
            uv_timer_stop(&l->retry); /* the attempt's deadline */
            l->reconnects++;
            say(l, "reconnected after %.1f s without a connection (attempt %u)%s",
                (double)(ro__now_ns() - l->lost_ns) * 1e-9, l->attempts + 1,
                w->node_id != l->node_id ? ", a new node id: the node restarted" : "");
            l->lost_ns = 0;
        } else if (!l->o.quiet && strcmp(l->o.role, "learner") == 0) {
            say(l, "%s x%u, node id %016llx", w->spec && w->spec->env ? w->spec->env : "?",
                w->spec ? w->spec->num_envs : 0, (unsigned long long)w->node_id);
        }
        l->node_id = w->node_id;
        l->attached = true;
        return;
    }
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR && f->error) {
        const char *m = f->error->message ? f->error->message : "";
        if (l->attached && f->error->code == ESHUTDOWN) {
            /* A reconnect to a node that is stopping: done, as after a goodbye. */
            ro__link_close(l, "the node is stopping", true);
        } else if (l->attached) {
            /* A reconnect refused ("too many connections"): the attempt
             * failed, the next may not. */
            snprintf(err, sizeof err, "refused: %.200s", m);
            ro__link_close(l, err, false);
        } else {
            snprintf(err, sizeof err, "refused us: %.200s", m);
            l->failed = true;
            ro__link_close(l, err, true);
        }
        return;
    }
    ro__link_fail(l, "expected welcome, got %s", ro__frame_kind(f));
}

static void on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    ro_link_t *l = c->o.owner;
    if (!l->welcomed) {
        on_greeting(l, f);
        return;
    }
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        l->has_goodbye_steps = f->goodbye->steps != NULL;
        l->goodbye_steps = f->goodbye->steps ? f->goodbye->steps->env_steps : 0;
        ro__link_close(l, "node said goodbye", true);
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        /* The node timed us out (we were slow, or the link was cut): come
         * back. Any other error is final. */
        if (f->error->code != ETIMEDOUT || l->o.reconnect_s <= 0) {
            l->failed = true;
            ro__link_close(l, f->error->message ? f->error->message : "error", true);
        } else {
            ro__link_close(l, f->error->message ? f->error->message : "timed out", false);
        }
        break;
    default:
        l->o.ops->on_frame(l, f, keep);
        break;
    }
}

static void on_connect(ro_conn_t *c, int status)
{
    ro_link_t *l = c->o.owner;
    if (status != 0 && l->upgrading)
        return; /* the private socket: back to TCP (ended) */
    if (status != 0) {
        /* Refused, or no socket file yet ("unix:PATH"): a node still starting. */
        bool not_yet = status == UV_ECONNREFUSED || (status == UV_ENOENT && c->local);
        if (!l->attached && not_yet && l->o.reconnect_s > 0) {
            if (!l->early) { /* a node still starting: wait for it */
                l->early = true;
                l->lost_ns = ro__now_ns();
                l->backoff_ms = RECONNECT_MIN_MS;
            }
        } else if (!l->attached) { /* the first connection: the address may be wrong */
            l->failed = true;
            l->final = true;
        }
        return; /* closing: on_closed follows */
    }
    l->connected = true;
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    /* Shared memory only on a Unix-domain socket: the node hands its
     * memories over it, with the welcome (runtime/shared_mem.h). */
    l->shared = l->o.shared_memory && c->local;
    h.shared_memory = l->shared;
    h.seed_memory = h.shared_memory;      /* SEED frames in memory too (serve.c maps it) */
    h.seed_memory_abi2 = h.shared_memory; /* env ABI 2 columns too (frame_rows.c reads them) */
    h.seed_ring = h.shared_memory && l->o.seed_ring; /* frames in a ring (serve.c takes them) */
    /* Over TCP, the node may offer its private socket; there, its nonce. */
    l->asked = l->o.upgrade && !c->local && !l->upgrade_failed;
    h.upgrade = l->asked;
    if (l->upgrading) {
        h.upgrade_nonce.data = l->nonce;
        h.upgrade_nonce.len = sizeof l->nonce;
    }
    h.protocol_version = RO_PROTOCOL_VERSION;
    h.role = (char *)l->o.role;
    h.token = (char *)l->o.token;
    h.name = (char *)l->o.name;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &h;
    ro__conn_send(&l->conn, &f);
}

static bool on_raw(ro_conn_t *c, const uint8_t *body, size_t len)
{
    ro_link_t *l = c->o.owner;
    return l->welcomed && l->o.ops->on_raw && l->o.ops->on_raw(l, body, len);
}

static const ro_conn_ops_t link_conn_ops = {
    .on_frame = on_frame,
    .on_raw = on_raw,
    .on_connect = on_connect,
    .on_closed = on_closed,
};

static void on_attempt_timeout(uv_timer_t *t)
{
    ro_link_t *l = t->data;
    if (!l->welcomed)
        ro__link_close(l, l->connected ? "no welcome within 5 s" : "connect timed out after 5 s",
                       false);
}

/* One connection attempt: a new generation. A reconnect attempt has
 * ATTEMPT_TIMEOUT_MS to be welcomed; the first one waits as long as the
 * kernel does. The name is resolved again for every attempt (a node may
 * come back elsewhere), waiting for the resolver: libuv's asynchronous
 * getaddrinfo would start its thread pool, and the learner runs exactly 1
 * loop thread + W workers. */
static void attempt(ro_link_t *l)
{
    l->gen++;
    l->connected = l->welcomed = false;
    l->why[0] = '\0';
    struct sockaddr_storage ss;
    char err[300];
    if (ro__addr_resolve(l->loop, l->upgrading ? &l->up_where : &l->where, &ss, "--connect", err,
                         sizeof err) != 0) {
        snprintf(l->why, sizeof l->why, "%s", err);
        if (!l->attached)
            l->failed = l->final = true;
        ended(l);
        return;
    }
    if (l->attached || l->early || l->upgrading)
        uv_timer_start(&l->retry, on_attempt_timeout, ATTEMPT_TIMEOUT_MS, 0);
    ro_conn_opts_t co = {
        .ops = &link_conn_ops,
        .owner = l,
        .program = "rollout-learner",
        .max_frame = l->o.max_frame,
        .max_queued = RO_CONN_MAX_QUEUED,
        .alloc = &l->alloc,
    };
    snprintf(l->conn.label, sizeof l->conn.label, "node %s", l->o.addr);
    if (ro__conn_connect(&l->conn, l->loop, (struct sockaddr *)&ss, &co) != 0) {
        uv_timer_stop(&l->retry);
        snprintf(l->why, sizeof l->why, "out of memory");
        l->failed = l->final = true;
        ended(l);
    }
}

int ro__link_start(ro_link_t *l, uv_loop_t *loop, const ro_link_opts_t *o, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    l->loop = loop;
    l->o = *o;
    int rc = ro__addr_parse(o->addr, false, &l->where, "--connect", err, errlen);
    if (rc)
        return rc;
    /* Frames a lane still holds decode into this; a few frames' worth. */
    ro__pb_alloc_init(&l->alloc, 4 * o->max_frame + (1u << 20));
    uv_timer_init(loop, &l->retry);
    l->retry.data = l;
    attempt(l);
    return 0;
}

void ro__link_release(ro_link_t *l)
{
    uv_close((uv_handle_t *)&l->retry, NULL);
}
