#include "wire/checks.h"

#include "wire/seed_memory.h"

#include <math.h>
#include <string.h>
#include <sys/un.h>

#include "runtime/error.h"
#include "runtime/text.h"
#include "wire/frame.h"
#include "wire/varint.h"

/* Constant time in the expected token's length: no timing oracle. */
static bool token_ok(const char *want, const char *given)
{
    if (!want)
        return true;
    if (!given)
        return false;
    size_t n = strlen(want), m = strlen(given);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

int ro__check_hello(const Rollout__V1__Hello *h, const ro_hello_rules_t *rules, bool *trainer,
                    char *err, size_t errlen)
{
    if (h->protocol_version != RO_PROTOCOL_VERSION)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "protocol version %u is not supported (this node speaks %u)",
                          h->protocol_version, RO_PROTOCOL_VERSION);
    bool learner = h->role && strcmp(h->role, "learner") == 0;
    bool train = h->role && strcmp(h->role, "trainer") == 0;
    if ((learner && !rules->learners) || (train && !rules->trainers) || (!learner && !train)) {
        char shown[64];
        return ro__errorf(err, errlen, RO_EPROTO,
                          "role '%s' is not served here (this node takes %s)",
                          ro__text_log(shown, sizeof shown, h->role, 40),
                          rules->learners ? "learners" : "trainers pushing policies");
    }
    if (!token_ok(rules->token, h->token))
        return ro__errorf(err, errlen, RO_EACCES, "missing or wrong token");
    *trainer = train;
    return 0;
}

/* next_field reads the field at p[*pos..n): its number, wire type and, for
 * a length-delimited one, where its bytes start and how many; the others
 * are skipped. false at the end or on bytes that are not fields (the
 * decoder then says what is wrong). */
static bool next_field(const uint8_t *p, size_t n, size_t *pos, uint32_t *field, size_t *at,
                       size_t *len)
{
    uint64_t tag, v;
    int k = ro__varint_get(p + *pos, n - *pos, &tag);
    if (k <= 0)
        return false;
    *pos += (size_t)k;
    *field = (uint32_t)(tag >> 3);
    *len = 0;
    switch (tag & 7) {
    case 0:
        k = ro__varint_get(p + *pos, n - *pos, &v);
        if (k <= 0)
            return false;
        *pos += (size_t)k;
        return true;
    case 1:
    case 5: {
        const size_t w = (tag & 7) == 1 ? 8 : 4;
        if (n - *pos < w)
            return false;
        *pos += w;
        return true;
    }
    case 2:
        k = ro__varint_get(p + *pos, n - *pos, &v);
        if (k <= 0 || v > n - *pos - (size_t)k)
            return false;
        *at = *pos + (size_t)k;
        *len = (size_t)v;
        *pos = *at + *len;
        *field |= 1u << 31; /* length-delimited */
        return true;
    default:
        return false;
    }
}

int ro__check_hello_bytes(const uint8_t *body, size_t len, char *err, size_t errlen)
{
    static const char *const names[] = {[2] = "role", [3] = "token", [4] = "name"};
    size_t pos = 0, at = 0, n;
    uint32_t field;
    while (next_field(body, len, &pos, &field, &at, &n)) {
        if (field != (1u << 31 | ROLLOUT__V1__FRAME__BODY_HELLO))
            continue;
        const uint8_t *h = body + at;
        size_t hpos = 0, sat = 0, sn;
        uint32_t f2;
        while (next_field(h, n, &hpos, &f2, &sat, &sn)) {
            const uint32_t num = f2 & ~(1u << 31);
            if ((f2 >> 31) && num >= 2 && num <= 4 && memchr(h + sat, 0, sn))
                return ro__errorf(err, errlen, num == 3 ? RO_EACCES : RO_EPROTO,
                                  "the hello's %s holds a NUL byte", names[num]);
        }
    }
    return 0;
}

int ro__check_first_frame(const Rollout__V1__Frame *f, const ro_hello_rules_t *rules, bool *trainer,
                          char *err, size_t errlen)
{
    if (f->body_case != ROLLOUT__V1__FRAME__BODY_HELLO || !f->hello)
        return ro__errorf(err, errlen, RO_EPROTO, "expected hello first, got %s",
                          ro__frame_kind(f));
    return ro__check_hello(f->hello, rules, trainer, err, errlen);
}

int ro__check_actions(const Rollout__V1__Actions *a, size_t rows, const ro_space_t *act, char *err,
                      size_t errlen)
{
    const bool discrete = act->kind == RO_SPACE_DISCRETE;
    const size_t dim = ro_space_size(act);
    const size_t want = rows * dim;
    const size_t got = discrete ? a->n_discrete : a->n_box;
    const unsigned long long seq = (unsigned long long)a->seq;
    const size_t other = discrete ? a->n_box : a->n_discrete;
    const char *kind = discrete ? "discrete" : "box", *other_kind = discrete ? "box" : "discrete";
    /* The wrong kind says so: "0 discrete values" would hide what was sent. */
    if (other != 0 && got == 0)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "actions for seq %llu: %zu %s values, but the env's actions are %s: "
                          "expected %zu %s values",
                          seq, other, other_kind, kind, want, kind);
    if (other != 0)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "actions for seq %llu: %zu discrete and %zu box values in one frame; the "
                          "env's actions are %s: expected %zu %s values only",
                          seq, a->n_discrete, a->n_box, kind, want, kind);
    if (got != want)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "actions for seq %llu: %zu %s values, expected %zu", seq, got, kind,
                          want);
    return ro__check_action_values(a->discrete, a->box, rows, act, a->seq, err, errlen);
}

int ro__check_action_values(const int32_t *disc, const float *box, size_t rows,
                            const ro_space_t *act, uint64_t seq_, char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)seq_;
    if (act->kind == RO_SPACE_DISCRETE) {
        for (size_t i = 0; i < rows; i++)
            if (disc[i] < 0 || (uint32_t)disc[i] >= act->n)
                return ro__errorf(err, errlen, RO_ERANGE,
                                  "actions for seq %llu: action %d at %zu is outside [0, %u)", seq,
                                  disc[i], i, act->n);
        return 0;
    }
    const size_t dim = ro_space_size(act);
    for (size_t i = 0; i < rows * dim; i++) {
        float v = box[i], lo = act->low[i % dim], hi = act->high[i % dim];
        if (!isfinite(v) || v < lo || v > hi)
            return ro__errorf(err, errlen, RO_ERANGE,
                              "actions for seq %llu: value %g at %zu is outside [%g, %g]", seq,
                              (double)v, i, (double)lo, (double)hi);
    }
    return 0;
}

int ro__check_state_request(const uint32_t *env, size_t nenv, size_t nstate, bool set,
                            uint32_t num_envs, uint8_t *seen, char *err, size_t errlen)
{
    const char *what = set ? "set_state" : "get_state";
    if (nenv == 0 || nenv > num_envs)
        return ro__errorf(err, errlen, RO_EPROTO, "%s of %zu envs; the node has %u", what, nenv,
                          num_envs);
    if (nstate != (set ? nenv : 0))
        return ro__errorf(err, errlen, RO_EPROTO, "%s of %zu envs with %zu states (expected %zu)",
                          what, nenv, nstate, set ? nenv : 0);
    memset(seen, 0, ((size_t)num_envs + 7) / 8);
    for (size_t i = 0; i < nenv; i++) {
        const uint32_t e = env[i];
        if (e >= num_envs)
            return ro__errorf(err, errlen, RO_EPROTO, "%s: env %u at %zu is outside [0, %u)", what,
                              e, i, num_envs);
        if (seen[e / 8] & (1u << (e % 8)))
            return ro__errorf(err, errlen, RO_EPROTO, "%s: env %u is named twice (again at %zu)",
                              what, e, i);
        seen[e / 8] |= (uint8_t)(1u << (e % 8));
    }
    return 0;
}

int ro__check_space(const Rollout__V1__Space *sp, ro_space_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!sp || !sp->kind)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome without a space");
    if (strcmp(sp->kind, "discrete") == 0) {
        if (sp->n < 1 || sp->n > (1u << 20))
            return ro__errorf(err, errlen, RO_EPROTO, "discrete space with n = %u", sp->n);
        out->kind = RO_SPACE_DISCRETE;
        out->n = sp->n;
        return 0;
    }
    if (strcmp(sp->kind, "box") != 0 || sp->n_shape < 1 || sp->n_shape > RO_SPACE_MAX_DIMS) {
        char shown[40];
        return ro__errorf(err, errlen, RO_EPROTO, "space of kind '%s' with %zu dims",
                          ro__text_log(shown, sizeof shown, sp->kind, 20), sp->n_shape);
    }
    out->kind = RO_SPACE_BOX;
    out->ndim = (uint32_t)sp->n_shape;
    size_t size = 1;
    for (size_t d = 0; d < sp->n_shape; d++) {
        if (sp->shape[d] < 1 || sp->shape[d] > (1u << 20) || size * sp->shape[d] > (1u << 20))
            return ro__errorf(err, errlen, RO_EPROTO, "box space with a bad shape");
        out->shape[d] = sp->shape[d];
        size *= sp->shape[d];
    }
    if (sp->n_low != size || sp->n_high != size)
        return ro__errorf(err, errlen, RO_EPROTO, "box space of %zu values with %zu/%zu bounds",
                          size, sp->n_low, sp->n_high);
    for (size_t i = 0; i < size; i++)
        /* Infinite bounds are allowed (unbounded observations); NaN and
         * inverted ones are not. */
        if (isnan(sp->low[i]) || isnan(sp->high[i]) || sp->low[i] > sp->high[i])
            return ro__errorf(err, errlen, RO_EPROTO, "box space with bounds [%g, %g] at %zu",
                              (double)sp->low[i], (double)sp->high[i], i);
    out->low = sp->low;
    out->high = sp->high;
    return 0;
}

int ro__check_welcome(const Rollout__V1__Welcome *w, uint32_t max_envs, ro_space_t *obs,
                      ro_space_t *act, char *err, size_t errlen)
{
    if (w->protocol_version != RO_PROTOCOL_VERSION)
        return ro__errorf(err, errlen, RO_EPROTO, "protocol version %u (this learner speaks %u)",
                          w->protocol_version, RO_PROTOCOL_VERSION);
    const Rollout__V1__EnvSpec *spec = w->spec;
    if (!spec)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome without an env spec");
    int rc = ro__check_space(spec->observation, obs, err, errlen);
    if (rc == 0)
        rc = ro__check_space(spec->action, act, err, errlen);
    if (rc)
        return rc;
    if (obs->kind != RO_SPACE_BOX)
        return ro__errorf(err, errlen, RO_EPROTO, "observations must be a box");
    if (spec->num_envs < 1 || spec->num_envs > max_envs)
        return ro__errorf(err, errlen, RO_EPROTO, "num_envs %u outside [1, %u]", spec->num_envs,
                          max_envs);
    return 0;
}

static int check_observations_in_memory(const Rollout__V1__Observations *o, uint32_t num_envs,
                                        char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)o->seq;
    if (o->n_env || o->n_step || o->n_reward || o->n_terminated || o->n_truncated ||
        o->n_episode_start || o->n_obs || o->n_final_index || o->n_final_obs)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "observations %llu in memory, yet with columns in the frame", seq);
    uint32_t rows;
    char why[200];
    if (ro__seed_mem_rows(o->ranges, o->n_ranges, num_envs, &rows, why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EPROTO, "observations %llu: %s", seq, why);
    return 0;
}

int ro__check_observations(const Rollout__V1__Observations *o, uint32_t obs_dim, uint32_t num_envs,
                           char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)o->seq;
    size_t n = o->n_env;
    if (o->n_ranges && !o->in_memory)
        return ro__errorf(err, errlen, RO_EPROTO, "observations %llu: ranges, but not in memory",
                          seq);
    if (o->in_memory) /* the columns are in the node's memory: only ranges here */
        return check_observations_in_memory(o, num_envs, err, errlen);
    if (n == 0 || o->n_step != n || o->n_reward != n || o->n_terminated != n ||
        o->n_truncated != n || o->n_episode_start != n || o->n_obs != n * obs_dim ||
        o->n_final_index > n || o->n_final_obs != o->n_final_index * obs_dim)
        return ro__errorf(err, errlen, RO_EPROTO, "observations %llu: inconsistent field lengths",
                          seq);
    return ro__check_observation_rows(o, n, num_envs, "env", err, errlen);
}

int ro__check_observation_rows(const Rollout__V1__Observations *o, size_t n, uint32_t limit,
                               const char *what, char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)o->seq;
    for (size_t i = 0; i < n; i++)
        if (o->env[i] >= limit)
            return ro__errorf(err, errlen, RO_EPROTO, "observations %llu: %s %u outside [0, %u)",
                              seq, what, o->env[i], limit);
    for (size_t i = 0; i < o->n_final_index; i++)
        if (o->final_index[i] >= n)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "observations %llu: final_index %u outside the batch", seq,
                              o->final_index[i]);
    return 0;
}

int ro__check_upgrade(const Rollout__V1__Upgrade *u, char *err, size_t errlen)
{
    const size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1; /* 107 */
    size_t n = u->path ? strlen(u->path) : 0;
    if (n == 0 || n > max || u->path[0] != '/')
        return ro__errorf(err, errlen, RO_EPROTO,
                          "an upgrade to a path of %zu bytes, not an absolute socket path of at "
                          "most %zu",
                          n, max);
    if (u->nonce.len != 16)
        return ro__errorf(err, errlen, RO_EPROTO, "an upgrade nonce of %zu bytes, not 16",
                          u->nonce.len);
    return 0;
}
