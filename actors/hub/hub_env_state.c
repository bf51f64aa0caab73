/*
 * A learner's GetState and SetState (docs/protocol.md "Env state"): the
 * states of envs the learner holds, each in a frame awaiting its answer,
 * taken and restored through their shard's state port
 * (actors/exchange/state_port.h) while the hub holds their step batches:
 * between two steps of those envs, never while one is stepping. Loop
 * thread, as the hub.
 *
 * A frame that breaks the protocol (no envs or more than the node's, an
 * env outside them or named twice, states not one per env) fails the
 * session. A request the node cannot do is answered with a code and the
 * reason, and changes nothing: an env this learner does not hold, an env
 * without state support, a blob that is not a state of this env (checked
 * by envs/env_state.c as a snapshot from a file is: size, version, env
 * name, args), an answer over the frame limit, a set while other learners
 * share the node or while it records.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exchange/state_port.h"
#include "actors/exchange/step_batch.h"
#include "actors/hub/hub_internal.h"
#include "runtime/error.h"
#include "wire/checks.h"
#include "wire/conn.h"

/* Bytes an answer may spend on each env beside its blob (field tags and
 * lengths): the answer's size is checked with it before it is made. */
#define PER_ENV_OVERHEAD 32

/* One env of a request: its step batch (shard) and its index in it. */
typedef struct env_ref {
    ro_step_batch_t *b;
    uint32_t j;
} env_ref_t;

/* shard_of finds the shard of env e (shards hold consecutive envs, in
 * index order), or NULL. */
static ro_step_batch_t *shard_of(const ro_hub_t *h, uint32_t e, uint32_t *j)
{
    uint32_t lo = 0, hi = h->nshards;
    while (lo < hi) { /* the last shard whose first env is <= e */
        uint32_t mid = lo + (hi - lo) / 2;
        if (h->batches[mid]->first <= e)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    ro_step_batch_t *b = h->batches[lo - 1];
    const uint32_t envs = b->n / (b->agents ? b->agents : 1);
    if (e - b->first >= envs)
        return NULL;
    *j = e - b->first;
    return b;
}

/* resolve finds each env's shard, which must be in a frame awaiting s's
 * answer (held[] marks those shards) and offer a state port. */
static int resolve(ro_session_t *s, const uint32_t *env, size_t n, env_ref_t *ref, uint8_t *held,
                   char *err, size_t errlen)
{
    ro_hub_t *h = s->hub;
    for (ro_sent_batch_t *sb = s->flow.inflight_head; sb; sb = sb->next)
        for (ro_batch_item_t *it = sb->items; it; it = it->next)
            held[ro__step_batch_of_item(it)->index] = 1;
    for (size_t i = 0; i < n; i++) {
        ro_step_batch_t *b = shard_of(h, env[i], &ref[i].j);
        if (!b || !held[b->index])
            return ro__errorf(err, errlen, RO_EINVAL,
                              "env %u is not awaiting this learner's answer: states are taken and "
                              "set between steps of envs the learner holds (after their "
                              "observations came, before its actions)",
                              env[i]);
        if (!b->state)
            return ro__errorf(err, errlen, RO_ENOTSUP, "env %u: this node's envs keep no state",
                              env[i]);
        ref[i].b = b;
    }
    return 0;
}

/* get_states saves each env into one buffer (*buf, the caller frees it)
 * and points blob[i] at env i's. */
static int get_states(ro_hub_t *h, const env_ref_t *ref, size_t n, ProtobufCBinaryData *blob,
                      uint8_t **buf, char *err, size_t errlen)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = ref[i].b->state->bytes(ref[i].b->state, ref[i].j, &blob[i].len, err, errlen);
        if (rc)
            return rc;
        total += blob[i].len + PER_ENV_OVERHEAD; /* each at most 64 MiB: no overflow */
        if (total > h->o.max_frame)
            return ro__errorf(err, errlen, RO_EMSGSIZE,
                              "the states of %zu envs take over %zu bytes, the frame limit "
                              "(--max-frame-bytes): ask for fewer envs at a time",
                              n, h->o.max_frame);
    }
    if (!(*buf = malloc(total ? total : 1)))
        return ro__errorf(err, errlen, RO_ENOMEM, "no memory for %zu bytes of states", total);
    uint8_t *p = *buf;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        int rc =
            ref[i].b->state->save(ref[i].b->state, ref[i].j, p, blob[i].len, &len, err, errlen);
        if (rc)
            return rc;
        blob[i].data = p;
        blob[i].len = len;
        p += len;
    }
    return 0;
}

/* set_states checks every blob against its env, then loads them all; an
 * env that refuses its bytes after the checks is reset (state_port.h) and
 * named in err, the others are loaded. */
static int set_states(ro_hub_t *h, const env_ref_t *ref, const ProtobufCBinaryData *blob, size_t n,
                      char *err, size_t errlen)
{
    if (h->nsessions > 1)
        return ro__errorf(err, errlen, RO_EBUSY,
                          "set_state refused: %u learners share this node's envs, and envs move "
                          "between them at step boundaries; only a node's sole learner may set "
                          "states",
                          h->nsessions);
    for (size_t i = 0; i < n; i++) {
        int rc = ref[i].b->state->check(ref[i].b->state, ref[i].j, blob[i].data, blob[i].len, err,
                                        errlen);
        if (rc)
            return rc; /* nothing was loaded */
    }
    int first = 0;
    char env_err[256];
    for (size_t i = 0; i < n; i++) {
        int rc = ref[i].b->state->load(ref[i].b->state, ref[i].j, blob[i].data, blob[i].len,
                                       env_err, sizeof env_err);
        if (rc && !first) {
            first = rc;
            snprintf(err, errlen, "%s", env_err);
        }
    }
    return first;
}

void ro__hub_env_state(ro_session_t *s, const Rollout__V1__Frame *f, ro_hub_fail_fn fail)
{
    ro_hub_t *h = s->hub;
    const bool set = f->body_case == ROLLOUT__V1__FRAME__BODY_SET_STATE;
    const char *what = set ? "set_state" : "get_state";
    if (s->trainer || h->segs) {
        fail(s, RO_EPROTO,
             "a %s from a trainer, or to a stream node: only a SEED learner takes and sets the "
             "states of the envs it holds",
             what);
        return;
    }
    const uint32_t *env = set ? f->set_state->env : f->get_state->env;
    const size_t n = set ? f->set_state->n_env : f->get_state->n_env;
    const ProtobufCBinaryData *in = set ? f->set_state->state : NULL;
    char err[400];
    /* Scratch: the envs' bitmap, the held shards, the refs and the blobs;
     * n <= num_envs once checked, so it is bounded by the node's size. */
    const size_t seen_bytes = ((size_t)h->num_envs + 7) / 8;
    uint8_t *seen = calloc(seen_bytes + h->nshards, 1);
    env_ref_t *ref = NULL;
    ProtobufCBinaryData *out = NULL;
    uint8_t *buf = NULL;
    int rc = seen ? 0 : RO_ENOMEM;
    if (rc == 0 && (rc = ro__check_state_request(env, n, set ? f->set_state->n_state : 0, set,
                                                 h->num_envs, seen, err, sizeof err))) {
        fail(s, rc, "%s", err);
        goto done;
    }
    if (rc == 0 && (!(ref = calloc(n, sizeof *ref)) || (!set && !(out = calloc(n, sizeof *out)))))
        rc = RO_ENOMEM;
    if (rc == RO_ENOMEM)
        ro__errorf(err, sizeof err, rc, "no memory for a %s of %zu envs", what, n);
    if (rc == 0)
        rc = resolve(s, env, n, ref, seen + seen_bytes, err, sizeof err);
    if (rc == 0)
        rc = set ? set_states(h, ref, in, n, err, sizeof err)
                 : get_states(h, ref, n, out, &buf, err, sizeof err);
    Rollout__V1__EnvStates a = ROLLOUT__V1__ENV_STATES__INIT;
    a.n_env = n;
    a.env = (uint32_t *)env;
    if (rc == 0 && !set) {
        a.n_state = n;
        a.state = out;
    }
    if (rc) {
        a.code = (uint32_t)-rc;
        a.error = err;
        if (!s->state_refused) /* once a session: the learner has every refusal's reason */
            ro__conn_log(&s->conn, "%s of %zu envs refused: %s", what, n, err);
        s->state_refused = true;
    }
    ro_frame_t fr = ROLLOUT__V1__FRAME__INIT;
    fr.body_case = ROLLOUT__V1__FRAME__BODY_ENV_STATES;
    fr.env_states = &a;
    if ((rc = ro__conn_send(&s->conn, &fr)) != 0)
        fail(s, rc, "could not send the %s answer", what);
done:
    free(buf);
    free(out);
    free(ref);
    free(seen);
}
