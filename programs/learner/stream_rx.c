#include "learner/stream_rx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

int ro__stream_rx_init(ro_stream_rx_t *rx, const ro_segment_rules_t *rules)
{
    memset(rx, 0, sizeof *rx);
    rx->rules = *rules;
    rx->next_seq = calloc(rules->num_envs, sizeof *rx->next_seq);
    rx->ep_ret = calloc(rules->num_envs, sizeof *rx->ep_ret);
    rx->version_min = UINT64_MAX;
    return rx->next_seq && rx->ep_ret ? 0 : RO_ENOMEM;
}

void ro__stream_rx_free(ro_stream_rx_t *rx)
{
    ro__shared_mem_release(&rx->shm);
    free(rx->next_seq);
    free(rx->ep_ret);
    rx->next_seq = NULL;
    rx->ep_ret = NULL;
}

void ro__stream_rx_restart(ro_stream_rx_t *rx)
{
    memset(rx->next_seq, 0, rx->rules.num_envs * sizeof *rx->next_seq);
    memset(rx->ep_ret, 0, rx->rules.num_envs * sizeof *rx->ep_ret);
}

/* in_memory_rewards refuses a segment in the node's memory whose rewards
 * are not all finite (NaN, an infinity), by name: no node writes one
 * (an env's non-finite reward is its error), so another hand did. */
static int in_memory_rewards(const ro_segment_view_t *v, char *err, size_t errlen)
{
    const uint8_t *reward = ro__segment_view_find(v, "reward")->data;
    for (size_t i = 0; v->in_memory && i < (size_t)v->t * v->n; i++) {
        float r;
        memcpy(&r, reward + 4 * i, sizeof r);
        if (!isfinite(r))
            return ro__errorf(err, errlen, RO_ERANGE,
                              "segment %llu in memory: the reward of env %zu at step %zu is %s",
                              (unsigned long long)v->seq, v->first_env + i % v->n, i / v->n,
                              isnan(r) ? "NaN" : "infinite");
    }
    return 0;
}

/* Steps, episodes and returns of a checked segment. Steps are rows (ABI
 * 2: agent steps, as the node's summary counts them); episodes and returns
 * are envs', an env's return its agents' mean, as the node has them. An
 * env's episode ends for all its agents at once (env-api.md): its first
 * row says. */
static void account(ro_stream_rx_t *rx, const ro_segment_view_t *v)
{
    const uint8_t *reward = ro__segment_view_find(v, "reward")->data;
    const uint8_t *term = ro__segment_view_find(v, "terminated")->data;
    const uint8_t *trunc = ro__segment_view_find(v, "truncated")->data;
    const uint32_t A = rx->rules.abi2 && rx->rules.agents ? rx->rules.agents : 1;
    double *ret = rx->ep_ret + v->first_env;
    for (uint32_t t = 0; t < v->t; t++) {
        const size_t row = (size_t)t * v->n;
        for (uint32_t e = 0; e < v->n / A; e++) {
            const size_t r0 = row + (size_t)e * A;
            double sum = 0.0;
            for (uint32_t a = 0; a < A; a++) {
                float r; /* the frame's bytes may be unaligned */
                memcpy(&r, reward + 4 * (r0 + a), sizeof r);
                sum += r;
            }
            ret[e] += sum / A;
            if (term[r0] | trunc[r0]) {
                rx->episodes++;
                rx->return_sum += ret[e];
                if (rx->returns)
                    ro__histo_add(rx->returns, ret[e]);
                ret[e] = 0.0;
            }
        }
    }
    rx->steps += (uint64_t)v->t * v->n;
    rx->segments++;
    rx->in_memory += v->in_memory;
    rx->version_min = v->version_min < rx->version_min ? v->version_min : rx->version_min;
    rx->version_max = v->version_max > rx->version_max ? v->version_max : rx->version_max;
}

int ro__stream_rx_frame(ro_stream_rx_t *rx, const uint8_t *body, size_t len, uint64_t *ack,
                        char *err, size_t errlen)
{
    ro_segment_view_t v;
    int rc = ro__segment_view_parse(body, len, &v, err, errlen);
    if (rc <= 0)
        return rc;
    if ((rc = ro__segment_view_resolve(&v, rx->shm.base, rx->shm.bytes, err, errlen)) != 0 ||
        (rc = ro__segment_view_check(&v, &rx->rules, err, errlen)) != 0 ||
        (rc = in_memory_rewards(&v, err, errlen)) != 0)
        return rc;
    if (v.shard >= rx->rules.num_envs)
        return ro__errorf(err, errlen, RO_EPROTO, "segment %llu: shard %u of a node of %u envs",
                          (unsigned long long)v.seq, v.shard, rx->rules.num_envs);
    *ack = v.seq;
    /* A shard's segments come in order; one sent again after a reconnect
     * (its ack was lost with the connection) is counted once. */
    if (v.shard_seq < rx->next_seq[v.shard]) {
        rx->duplicates++;
        return 1;
    }
    if (rx->next_seq[v.shard] && v.shard_seq > rx->next_seq[v.shard])
        rx->gaps += v.shard_seq - rx->next_seq[v.shard];
    rx->next_seq[v.shard] = v.shard_seq + 1;
    account(rx, &v);
    return 1;
}
