#include "actors/logger/logger_export.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "metrics/prom_text.h"
#include "ro_build_config.h"
#include "runtime/error.h"

static uint64_t dropped(const ro_logger_export_t *x)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < x->o.nrings; i++)
        n += ro__metrics_ring_dropped(&x->o.rings[i]);
    return n;
}

/* Where the envs wait, shown while the node has what it counts (remote
 * learners, stream mode, a recording): one table for both exports, the
 * Prometheus family prom (type, help) and the TensorBoard tag tb, each
 * with its unit's scale. */
enum { REMOTE = 1, STREAM = 2, RECORDING = 4 };
enum { U32, U64, F64 };
typedef struct queue_metric {
    unsigned when; /* shown if the sample has any of these */
    const char *prom, *type, *help, *tb;
    size_t off; /* the value in ro_logger_sample_t, of kind */
    int kind;
    double prom_scale, tb_scale;
} queue_metric_t;

#define VAL(kind, field) offsetof(ro_logger_sample_t, field), kind

static const queue_metric_t queue_metrics[] = {
    {REMOTE | STREAM, "rollout_learners", "gauge", "Learner connections attached",
     "queues/learners", VAL(U32, hub.learners), 1, 1},
    {REMOTE, "rollout_envs_in_flight", "gauge", "Envs whose actions a learner owes",
     "queues/envs_in_flight", VAL(U32, hub.envs_in_flight), 1, 1},
    {REMOTE, "rollout_envs_unsent", "gauge", "Envs ready, waiting for a batch or a learner",
     "queues/envs_unsent", VAL(U32, hub.envs_unsent), 1, 1},
    {REMOTE, "rollout_oldest_wait_seconds", "gauge", "Age of the oldest unanswered batch",
     "queues/oldest_wait_ms", VAL(U64, hub.oldest_wait_ns), 1e-9, 1e-6},
    {REMOTE, "rollout_queued_bytes", "gauge", "Bytes queued for learners, not yet sent",
     "queues/queued_bytes", VAL(U64, hub.queued_bytes), 1, 1},
    {REMOTE, "rollout_batches_resent_total", "counter",
     "Batches sent again to a learner after a reconnect", "queues/batches_resent",
     VAL(U64, hub.batches_resent), 1, 1},
    {REMOTE, "rollout_spin_hits_total", "counter",
     "Loop spins (--spin-us) that saw the learner's actions in time", "queues/spin_hits",
     VAL(U64, hub.spin_hits), 1, 1},
    {REMOTE, "rollout_spin_misses_total", "counter", "Loop spins that ran out",
     "queues/spin_misses", VAL(U64, hub.spin_misses), 1, 1},
    {STREAM, "rollout_segments_in_flight", "gauge", "Segments sent, not acknowledged",
     "queues/segments_in_flight", VAL(U32, hub.segments_in_flight), 1, 1},
    {STREAM, "rollout_segments_unsent", "gauge", "Segments waiting for a learner's window",
     "queues/segments_unsent", VAL(U32, hub.segments_unsent), 1, 1},
    {STREAM, "rollout_segments_acked_total", "counter", "Segments acknowledged",
     "queues/segments_acked", VAL(U64, hub.segments_acked), 1, 1},
    {STREAM, "rollout_stream_waits_total", "counter",
     "Times an env actor waited for a free segment", "queues/stream_waits", VAL(U64, stream_waits),
     1, 1},
    {STREAM, "rollout_segments_dropped_lag_total", "counter",
     "Segments dropped as too many policy versions behind", "queues/segments_dropped_lag",
     VAL(U64, hub.segments_dropped_lag), 1, 1},
    {STREAM, "rollout_policy_lag_mean", "gauge", "Mean policy versions behind of the segments sent",
     "rollout/policy_lag_mean", VAL(F64, hub.policy_lag_mean), 1, 1},
    {RECORDING, "rollout_record_waits_total", "counter", "Shard steps that waited for the disk",
     "queues/record_waits", VAL(U64, record_waits), 1, 1},
    {RECORDING, "rollout_record_dropped_steps_total", "counter",
     "Env steps not recorded (--record-full drop)", "queues/record_dropped",
     VAL(U64, record_dropped), 1, 1},
};

/* shown: the sample has what m counts. */
static bool shown(const queue_metric_t *m, const ro_logger_sample_t *s)
{
    return ((m->when & REMOTE) && s->remote) || ((m->when & STREAM) && s->stream) ||
           ((m->when & RECORDING) && s->recording);
}

/* value_of reads m's value out of s. */
static double value_of(const queue_metric_t *m, const ro_logger_sample_t *s)
{
    const char *p = (const char *)s + m->off;
    switch (m->kind) {
    case U32:
        return *(const uint32_t *)(const void *)p;
    case U64:
        return (double)*(const uint64_t *)(const void *)p;
    default:
        return *(const double *)(const void *)p;
    }
}

/* A counter or gauge family of one sample with the node's labels. */
static void one(FILE *f, const ro_logger_export_t *x, const char *name, const char *type,
                const char *help, double v)
{
    ro__prom_family(f, name, type, help);
    ro__prom_sample(f, name, x->labels, v);
}

static void histo_family(FILE *f, const ro_logger_export_t *x, const char *name, const char *help,
                         const ro_histo_t *h)
{
    ro__prom_family(f, name, "histogram", help);
    ro__prom_histo(f, name, x->labels, h);
}

/* env_metrics_prom: an env ABI 2 env's per-episode metrics, one sample per
 * metric (label metric="name"). */
static void env_metrics_prom(FILE *f, const ro_logger_export_t *x, const ro_logger_sample_t *s)
{
    if (!s->nmetrics)
        return;
    char lab[RO_ENV_MAX_METRICS][sizeof x->labels + RO_ENV_MAX_NAME + 16];
    for (uint32_t m = 0; m < s->nmetrics; m++) {
        snprintf(lab[m], sizeof lab[m], "%s", x->labels);
        ro__prom_label(lab[m], sizeof lab[m], "metric", s->metric_name[m]);
    }
    ro__prom_family(f, "rollout_env_metric_mean", "gauge",
                    "Mean of an env's per-episode metric over the episodes that reported it");
    for (uint32_t m = 0; m < s->nmetrics; m++)
        ro__prom_sample(f, "rollout_env_metric_mean", lab[m],
                        s->metric_count[m] ? s->metric_sum[m] / (double)s->metric_count[m] : NAN);
    ro__prom_family(f, "rollout_env_metric_episodes_total", "counter",
                    "Episodes that reported an env's per-episode metric");
    for (uint32_t m = 0; m < s->nmetrics; m++)
        ro__prom_sample(f, "rollout_env_metric_episodes_total", lab[m], (double)s->metric_count[m]);
}

/* render: the Prometheus text of this moment (the endpoint's callback). */
static void render(void *ctx, FILE *f)
{
    ro_logger_export_t *x = ctx;
    ro_logger_sample_t s;
    x->o.sample(x->o.sample_ctx, &s);
    ro__prom_family(f, "rollout_build_info", "gauge", "rollout's version (always 1)");
    char lab[sizeof x->labels + 64];
    snprintf(lab, sizeof lab, "%s", x->labels);
    ro__prom_label(lab, sizeof lab, "version", RO_VERSION);
    ro__prom_sample(f, "rollout_build_info", lab, 1);
    one(f, x, "rollout_steps_total", "counter", "Env steps taken", (double)s.steps);
    one(f, x, "rollout_episodes_total", "counter", "Episodes finished", (double)s.episodes);
    one(f, x, "rollout_episode_return_sum_total", "counter",
        "Sum of the returns of the finished episodes (with rollout_episodes_total: the mean)",
        s.return_sum);
    one(f, x, "rollout_env_failures_total", "counter",
        "Env steps that failed or gave NaN or infinite values (the env was reset)",
        (double)*x->o.env_failures);
    one(f, x, "rollout_forward_batches_total", "counter",
        "Batches of observations sent to a forward pass (local lanes or remote learners)",
        (double)s.batches);
    one(f, x, "rollout_forward_rows_total", "counter",
        "Env rows in those batches (divided by the batches: the mean batch size)", (double)s.rows);
    one(f, x, "rollout_metrics_dropped_total", "counter",
        "Episode records the logger's rings dropped (full)", (double)dropped(x));
    one(f, x, "rollout_policy_version", "gauge", "Version of the policy acting in this node",
        (double)s.policy_version);
    for (size_t i = 0; i < sizeof queue_metrics / sizeof queue_metrics[0]; i++) {
        const queue_metric_t *m = &queue_metrics[i];
        if (shown(m, &s))
            one(f, x, m->prom, m->type, m->help, value_of(m, &s) * m->prom_scale);
    }
    if (s.histos) {
        histo_family(f, x, "rollout_episode_return", "Returns of the finished episodes", &s.ret);
        histo_family(f, x, "rollout_episode_length", "Lengths of the finished episodes, in steps",
                     &s.len);
    }
    env_metrics_prom(f, x, &s);
}

int ro__logger_export_open(ro_logger_export_t *x, uv_loop_t *loop, const ro_logger_export_opts_t *o,
                           char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    x->o = *o;
    char v[32];
    snprintf(v, sizeof v, "%u", o->node_index);
    ro__prom_label(x->labels, sizeof x->labels, "node_index", v);
    if (o->numa_node >= 0)
        snprintf(v, sizeof v, "%d", o->numa_node);
    else
        snprintf(v, sizeof v, "all");
    ro__prom_label(x->labels, sizeof x->labels, "numa_node", v);
    ro__prom_label(x->labels, sizeof x->labels, "env", o->env);
    return ro__exporters_open(&x->out, loop, o->tensorboard, o->prometheus, "rollout-node", render,
                              x, err, errlen);
}

static double per(double a, double b)
{
    return b > 0 ? a / b : NAN; /* NaN: left out of the event */
}

void ro__logger_export_interval(ro_logger_export_t *x, const ro_logger_sample_t *cur,
                                const ro_logger_sample_t *last, double dt)
{
    ro_tb_writer_t *w = ro__exporters_tb(&x->out);
    if (w) {
        double de = (double)(cur->episodes - last->episodes);
        ro__tb_scalar(w, "rollout/steps_per_s", per((double)(cur->steps - last->steps), dt));
        ro__tb_scalar(w, "rollout/episodes", (double)cur->episodes);
        ro__tb_scalar(w, "rollout/episode_return_mean",
                      per(cur->return_sum - last->return_sum, de));
        ro_histo_t ret, len;
        if (cur->histos) {
            ro__histo_sub(&ret, &cur->ret, &last->ret);
            ro__histo_sub(&len, &cur->len, &last->len);
            ro__tb_scalar(w, "rollout/episode_length_mean", per(len.sum, (double)len.n));
        }
        ro__tb_scalar(w, "rollout/env_failures", (double)*x->o.env_failures);
        ro__tb_scalar(
            w, "rollout/mean_batch",
            per((double)(cur->rows - last->rows), (double)(cur->batches - last->batches)));
        ro__tb_scalar(w, "rollout/metrics_dropped", (double)dropped(x));
        ro__tb_scalar(w, "rollout/policy_version", (double)cur->policy_version);
        for (size_t i = 0; i < sizeof queue_metrics / sizeof queue_metrics[0]; i++) {
            const queue_metric_t *m = &queue_metrics[i];
            if (shown(m, cur))
                ro__tb_scalar(w, m->tb, value_of(m, cur) * m->tb_scale);
        }
        for (uint32_t m = 0; m < cur->nmetrics && m < RO_ENV_MAX_METRICS; m++) {
            /* Names are [A-Za-z0-9_] (checked at load) and stable for the run. */
            snprintf(x->metric_tag[m], sizeof x->metric_tag[m], "env/%s", cur->metric_name[m]);
            ro__tb_scalar(w, x->metric_tag[m],
                          per(cur->metric_sum[m] - last->metric_sum[m],
                              (double)(cur->metric_count[m] - last->metric_count[m])));
        }
        if (cur->histos) {
            ro__tb_histo(w, "rollout/episode_return", &ret);
            ro__tb_histo(w, "rollout/episode_length", &len);
        }
        ro__exporters_tb_write(&x->out, cur->steps);
    }
}

int ro__logger_export_close(ro_logger_export_t *x)
{
    return ro__exporters_close(&x->out);
}
