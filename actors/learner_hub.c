#include "actors/learner_hub_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "actors/messages.h"
#include "runtime/rng.h"
#include "wire/frame.h"

/* ---------- shard ownership and batching ---------- */

static void queue_append(ro_env_shard_t ***tail, ro_env_shard_t *sh)
{
    sh->ready_next = NULL;
    **tail = sh;
    *tail = &sh->ready_next;
}

static ro_session_t *least_loaded(ro_remote_t *h)
{
    ro_session_t *best = NULL;
    for (ro_session_t *s = h->sessions; s; s = s->next)
        if (s->attached && !s->trainer && !s->closing &&
            (!best || s->owned_rows < best->owned_rows))
            best = s;
    return best;
}

void ro__hub_set_owner(ro_remote_t *h, ro_env_shard_t *sh, ro_session_t *to)
{
    uint32_t i = shard_index(h, sh);
    ro_session_t *from = h->owner[i];
    if (from == to)
        return;
    if (from) {
        from->owned_rows -= sh->n;
        from->owned_shards--;
    }
    if (to) {
        to->owned_rows += sh->n;
        to->owned_shards++;
    }
    h->owner[i] = to;
}

static void maybe_flush(ro_session_t *s);

/* A ready shard: to its owner's pending list. A shard moves to another
 * learner only when it has none, or when its owner holds clearly more than
 * the least-loaded one (a new learner attached): lazy rebalancing, one
 * shard at a time, at a step boundary. */
void ro__hub_route(ro_remote_t *h, ro_env_shard_t *sh)
{
    ro_session_t *own = h->owner[shard_index(h, sh)];
    ro_session_t *least = least_loaded(h);
    if (!own || (least && own->owned_rows > least->owned_rows + sh->n))
        ro__hub_set_owner(h, sh, least);
    own = h->owner[shard_index(h, sh)];
    if (!own) {
        queue_append(&h->orphan_tail, sh);
        return;
    }
    if (own->pending_rows == 0)
        own->first_pending_ns = ro__now_ns();
    queue_append(&own->pending_tail, sh);
    own->pending_rows += sh->n;
    maybe_flush(own);
}

static void send_batch(ro_session_t *s)
{
    ro_remote_t *h = s->hub;
    sent_batch_t *b = h->free_batches;
    h->free_batches = b->next;
    b->next = NULL;
    b->shards = NULL;
    b->rows = 0;
    b->seq = s->next_seq++;
    b->sent_ns = ro__now_ns();

    const size_t od = h->obs_dim;
    ro_env_shard_t **tail = &b->shards;
    uint32_t r = 0, nfinal = 0;
    while (s->pending_head && r < h->o.batch) {
        ro_env_shard_t *sh = s->pending_head;
        s->pending_head = sh->ready_next;
        s->pending_rows -= sh->n;
        memcpy(h->s_obs + r * od, sh->obs, sh->n * od * sizeof(float));
        for (uint32_t j = 0; j < sh->n; j++, r++) {
            h->s_env[r] = sh->first + j;
            h->s_step[r] = sh->steps_done;
            h->s_reward[r] = sh->reward[j];
            h->s_term[r] = sh->terminated[j];
            h->s_trunc[r] = sh->truncated[j];
            h->s_start[r] = sh->episode_start[j];
            if (sh->has_final[j]) {
                memcpy(h->s_final + nfinal * od, sh->final_obs + j * od, od * sizeof(float));
                h->s_final_idx[nfinal++] = r;
            }
        }
        sh->ready_next = NULL;
        *tail = sh;
        tail = &sh->ready_next;
    }
    if (!s->pending_head)
        s->pending_tail = &s->pending_head;
    b->rows = r;
    s->first_pending_ns = ro__now_ns();
    *s->inflight_tail = b;
    s->inflight_tail = &b->next;
    s->inflight_rows += r;

    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.seq = b->seq;
    o.n_env = o.n_step = o.n_reward = o.n_terminated = o.n_truncated = o.n_episode_start = r;
    o.env = h->s_env;
    o.step = h->s_step;
    o.reward = h->s_reward;
    o.terminated = h->s_term;
    o.truncated = h->s_trunc;
    o.episode_start = h->s_start;
    o.n_obs = r * od;
    o.obs = h->s_obs;
    o.n_final_index = nfinal;
    o.final_index = h->s_final_idx;
    o.n_final_obs = nfinal * od;
    o.final_obs = h->s_final;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &o;
    h->stats.batches_sent++;
    h->stats.rows_sent += r;
    if (ro__session_send(s, &f) != 0)
        ro__session_close(s); /* its batches, this one included, go to others */
}

static void arm_timer(ro_remote_t *h);

static void maybe_flush(ro_session_t *s)
{
    ro_remote_t *h = s->hub;
    while (!s->closing && s->pending_rows > 0) {
        bool full = s->pending_rows >= h->o.batch;
        bool all_waiting = s->pending_rows + s->inflight_rows >= s->owned_rows;
        bool expired = h->o.max_wait_us == 0 ||
                       ro__now_ns() - s->first_pending_ns >= h->o.max_wait_us * 1000ull;
        if (!full && !all_waiting && !expired)
            break;
        send_batch(s);
    }
    if (!s->closing && s->pending_rows > 0)
        arm_timer(h);
}

static void on_timer(uv_timer_t *t)
{
    ro_remote_t *h = t->data;
    h->timer_armed = false;
    for (ro_session_t *s = h->sessions; s; s = s->next)
        if (s->attached)
            maybe_flush(s);
}

static void arm_timer(ro_remote_t *h)
{
    if (h->timer_armed)
        return;
    h->timer_armed = true;
    uint64_t ms = (h->o.max_wait_us + 999) / 1000;
    uv_timer_start(&h->timer, on_timer, ms ? ms : 1, 0);
}

/* Send the orphans (ready shards nobody owned) to the learners there are. */
void ro__hub_adopt_orphans(ro_remote_t *h)
{
    ro_env_shard_t *sh = h->orphan_head;
    h->orphan_head = NULL;
    h->orphan_tail = &h->orphan_head;
    while (sh) {
        ro_env_shard_t *next = sh->ready_next;
        ro__hub_route(h, sh);
        sh = next;
    }
}

/* Tell a shard we hold to finish without stepping (the node is stopping). */
void ro__hub_stop_shard(ro_env_shard_t *sh)
{
    sh->ready_next = NULL;
    sh->act_msg.type = RO_MSG_STOP;
    ro__actor_send(&sh->actor, &sh->act_msg);
}

/* A learner that leaves its oldest batch unanswered for learner_timeout_s
 * has stopped reading or is stuck: its envs go to the others. A connection
 * that has not said hello within hello_timeout_s is closed, so that silent
 * connections cannot hold the --max-learners slots. */
static void on_watchdog(uv_timer_t *t)
{
    ro_remote_t *h = t->data;
    uint64_t now = ro__now_ns(), limit = (uint64_t)(h->o.learner_timeout_s * 1e9);
    uint64_t hello_limit = (uint64_t)(h->o.hello_timeout_s * 1e9);
    ro_session_t *s = h->sessions;
    while (s) {
        ro_session_t *next = s->next;
        if (!s->attached && !s->closing && hello_limit && s->accepted_ns + hello_limit < now) {
            h->stats.timed_out++;
            ro__session_fail(s, RO_EPROTO, "no hello within %.1f s", h->o.hello_timeout_s);
            s = next;
            continue;
        }
        /* sent_ns may be later than now: closing one learner sends its
         * batches to another during this loop. */
        if (limit && s->attached && s->inflight_head && s->inflight_head->sent_ns + limit < now) {
            h->stats.timed_out++;
            /* ETIMEDOUT, not EPROTO: a learner may come back (rollout-learner
             * reconnects after this one, not after a protocol error). */
            ro__session_fail(s, RO_ETIMEDOUT,
                             "no actions for %.1f s, its envs move to other learners",
                             (double)(now - s->inflight_head->sent_ns) * 1e-9);
        }
        s = next;
    }
}

/* ---------- the actor ---------- */

static void remote_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_remote_t *h = ro__container_of(self, ro_remote_t, actor);
    ro_env_shard_t *sh = ro__container_of(msg, ro_env_shard_t, ready_msg);
    uint32_t i = shard_index(h, sh);
    if (msg->type == RO_MSG_SHARD_DONE) {
        ro_session_t *own = h->owner[i];
        ro__hub_set_owner(h, sh, NULL);
        h->active[i] = false;
        if (own)
            maybe_flush(own); /* the others of its shards may all be waiting now */
        if (--h->active_shards == 0)
            ro__actor_send(h->control, &h->done_msg);
        return;
    }
    if (h->stopping) {
        ro__hub_stop_shard(sh);
        return;
    }
    ro__hub_route(h, sh);
}

/* ---------- set-up and tear-down ---------- */

static int parse_listen(const char *spec, struct sockaddr_storage *ss, bool *loopback, char *err,
                        size_t errlen)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host)
        goto bad;
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || colon[1] == '\0' || port < 0 || port > 65535)
        goto bad;
    char *h = host;
    size_t hl = strlen(h);
    if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    if (uv_ip4_addr(h, (int)port, (struct sockaddr_in *)ss) == 0) {
        uint32_t a = ntohl(((struct sockaddr_in *)ss)->sin_addr.s_addr);
        *loopback = (a >> 24) == 127;
        return 0;
    }
    if (uv_ip6_addr(h, (int)port, (struct sockaddr_in6 *)ss) == 0) {
        static const unsigned char lo6[16] = {[15] = 1};
        *loopback = memcmp(&((struct sockaddr_in6 *)ss)->sin6_addr, lo6, 16) == 0;
        return 0;
    }
bad:
    snprintf(err, errlen, "--listen '%s': expected HOST:PORT with a numeric IPv4 or IPv6 address",
             spec);
    return RO_EINVAL;
}

int ro__remote_new(ro_remote_t **out, uv_loop_t *loop, ro_env_shard_t *shards, uint32_t nshards,
                   uint32_t num_envs, const ro_space_t *obs, const ro_space_t *act,
                   ro_actor_t *control, const ro_remote_opts_t *o, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    bool loopback = false;
    int rc = parse_listen(o->listen, &ss, &loopback, err, errlen);
    if (rc)
        return rc;
    if (!loopback && !o->token) {
        snprintf(err, errlen,
                 "--listen '%s' is not a loopback address: a --token-file is required so that "
                 "only your learners can attach",
                 o->listen);
        return RO_EINVAL;
    }
    ro_remote_t *h = calloc(1, sizeof *h);
    if (!h)
        return RO_ENOMEM;
    h->o = *o;
    if (o->token) {
        snprintf(h->token, sizeof h->token, "%s", o->token);
        h->has_token = true;
    }
    h->loop = loop;
    h->control = control;
    h->done_msg.type = RO_MSG_LANE_DONE;
    h->shards = shards;
    h->nshards = nshards;
    h->active_shards = nshards;
    h->num_envs = num_envs;
    h->obs_space = obs;
    h->act_space = act;
    h->obs_dim = (uint32_t)ro_space_size(obs);
    h->discrete = act->kind == RO_SPACE_DISCRETE;
    h->act_dim = (uint32_t)ro_space_size(act);
    h->orphan_tail = &h->orphan_head;
    h->node_id = ro__seed_mix(ro__now_ns(), (uint64_t)getpid(), 77);

    uint32_t max_shard = 0;
    for (uint32_t i = 0; i < nshards; i++)
        max_shard = shards[i].n > max_shard ? shards[i].n : max_shard;
    h->max_rows = o->batch + max_shard;
    size_t od = h->obs_dim, mr = h->max_rows;
    /* nshards is 0 when only trainers attach (local learner lanes). */
    h->owner = calloc(nshards + 1, sizeof *h->owner);
    h->active = calloc(nshards + 1, sizeof *h->active);
    h->pool = calloc(nshards + 1, sizeof *h->pool);
    h->s_env = calloc(mr, sizeof *h->s_env);
    h->s_step = calloc(mr, sizeof *h->s_step);
    h->s_obs = calloc(mr * od, sizeof *h->s_obs);
    h->s_final = calloc(mr * od, sizeof *h->s_final);
    h->s_reward = calloc(mr, sizeof *h->s_reward);
    h->s_term = calloc(mr, sizeof *h->s_term);
    h->s_trunc = calloc(mr, sizeof *h->s_trunc);
    h->s_start = calloc(mr, sizeof *h->s_start);
    h->s_final_idx = calloc(mr, sizeof *h->s_final_idx);
    if (!h->owner || !h->active || !h->pool || !h->s_env || !h->s_step || !h->s_obs ||
        !h->s_final || !h->s_reward || !h->s_term || !h->s_trunc || !h->s_start ||
        !h->s_final_idx) {
        ro__remote_free(h);
        return RO_ENOMEM;
    }
    for (uint32_t i = 0; i < nshards; i++) {
        h->active[i] = true;
        h->pool[i].next = h->free_batches;
        h->free_batches = &h->pool[i];
    }

    uv_tcp_init(loop, &h->server);
    h->server.data = h;
    rc = uv_tcp_bind(&h->server, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->server, 128, ro__session_accept);
    if (rc != 0) {
        snprintf(err, errlen, "--listen '%s': %s", o->listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&h->server, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        ro__remote_free(h);
        return RO_EIO;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    char ip[48] = "?";
    uv_tcp_getsockname(&h->server, (struct sockaddr *)&bound, &blen);
    if (bound.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&bound, ip, sizeof ip);
        snprintf(h->addr, sizeof h->addr, "%s:%d", ip,
                 ntohs(((struct sockaddr_in *)&bound)->sin_port));
    } else {
        uv_ip6_name((struct sockaddr_in6 *)&bound, ip, sizeof ip);
        snprintf(h->addr, sizeof h->addr, "[%s]:%d", ip,
                 ntohs(((struct sockaddr_in6 *)&bound)->sin6_port));
    }
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    uv_timer_init(loop, &h->watchdog);
    h->watchdog.data = h;
    /* Check 4 times per timeout (the shorter one). */
    double period_s = 0;
    if (o->learner_timeout_s > 0)
        period_s = o->learner_timeout_s / 4;
    if (o->hello_timeout_s > 0 && (period_s == 0 || o->hello_timeout_s / 4 < period_s))
        period_s = o->hello_timeout_s / 4;
    if (period_s > 0) {
        uint64_t ms = (uint64_t)(period_s * 1000.0);
        uv_timer_start(&h->watchdog, on_watchdog, ms ? ms : 1, ms ? ms : 1);
    }
    uv_async_init(loop, &h->async, ro__actor_async_cb);
    h->async.data = &h->actor;
    ro__actor_init_loop(&h->actor, "remote-learner", remote_behaviour, &h->async);
    *out = h;
    return 0;
}

ro_actor_t *ro__remote_actor(ro_remote_t *r)
{
    return &r->actor;
}

void ro__remote_address(const ro_remote_t *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s", r->addr);
}

void ro__remote_stop(ro_remote_t *h)
{
    if (h->stopping)
        return;
    h->stopping = true;
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    g.reason = "node stopping";
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &g;
    while (h->sessions) {
        ro_session_t *s = h->sessions;
        if (s->attached)
            ro__session_send(s, &f);
        ro__session_close(s); /* stops every shard it held */
    }
    ro_env_shard_t *sh = h->orphan_head;
    h->orphan_head = NULL;
    h->orphan_tail = &h->orphan_head;
    while (sh) {
        ro_env_shard_t *next = sh->ready_next;
        ro__hub_stop_shard(sh);
        sh = next;
    }
}

void ro__remote_close(ro_remote_t *h)
{
    uv_close((uv_handle_t *)&h->server, NULL);
    uv_close((uv_handle_t *)&h->timer, NULL);
    uv_close((uv_handle_t *)&h->watchdog, NULL);
    uv_close((uv_handle_t *)&h->async, NULL);
}

void ro__remote_stats(const ro_remote_t *h, ro_remote_stats_t *out)
{
    *out = h->stats;
    uint64_t now = ro__now_ns();
    /* At most --max-learners sessions and nshards orphans: cheap enough
     * for the logger's once-a-second sample. */
    for (const ro_session_t *s = h->sessions; s; s = s->next) {
        if (s->attached && !s->trainer)
            out->learners++;
        out->envs_in_flight += s->inflight_rows;
        out->envs_unsent += s->pending_rows;
        if (s->inflight_head && now - s->inflight_head->sent_ns > out->oldest_wait_ns)
            out->oldest_wait_ns = now - s->inflight_head->sent_ns;
        out->queued_bytes += uv_stream_get_write_queue_size((const uv_stream_t *)&s->tcp);
    }
    for (const ro_env_shard_t *sh = h->orphan_head; sh; sh = sh->ready_next)
        out->envs_unsent += sh->n;
}

void ro__remote_free(ro_remote_t *h)
{
    if (!h)
        return;
    free(h->owner);
    free(h->active);
    free(h->pool);
    free(h->s_env);
    free(h->s_step);
    free(h->s_obs);
    free(h->s_final);
    free(h->s_reward);
    free(h->s_term);
    free(h->s_trunc);
    free(h->s_start);
    free(h->s_final_idx);
    free(h);
}
