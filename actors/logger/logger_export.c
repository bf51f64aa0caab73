#include "actors/logger/logger_export.h"

#include <math.h>
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
    if (s.remote || s.stream)
        one(f, x, "rollout_learners", "gauge", "Learner connections attached", s.learners);
    if (s.remote) {
        one(f, x, "rollout_envs_in_flight", "gauge", "Envs whose actions a learner owes",
            s.envs_in_flight);
        one(f, x, "rollout_envs_unsent", "gauge", "Envs ready, waiting for a batch or a learner",
            s.envs_unsent);
        one(f, x, "rollout_oldest_wait_seconds", "gauge", "Age of the oldest unanswered batch",
            (double)s.oldest_wait_ns * 1e-9);
        one(f, x, "rollout_queued_bytes", "gauge", "Bytes queued for learners, not yet sent",
            (double)s.queued_bytes);
        one(f, x, "rollout_batches_resent_total", "counter",
            "Batches sent again to a learner after a reconnect", (double)s.batches_resent);
        one(f, x, "rollout_spin_hits_total", "counter",
            "Loop spins (--spin-us) that saw the learner's actions in time", (double)s.spin_hits);
        one(f, x, "rollout_spin_misses_total", "counter", "Loop spins that ran out",
            (double)s.spin_misses);
    }
    if (s.stream) {
        one(f, x, "rollout_segments_in_flight", "gauge", "Segments sent, not acknowledged",
            s.segments_in_flight);
        one(f, x, "rollout_segments_unsent", "gauge", "Segments waiting for a learner's window",
            s.segments_unsent);
        one(f, x, "rollout_segments_acked_total", "counter", "Segments acknowledged",
            (double)s.segments_acked);
        one(f, x, "rollout_stream_waits_total", "counter",
            "Times an env actor waited for a free segment", (double)s.stream_waits);
        one(f, x, "rollout_segments_dropped_lag_total", "counter",
            "Segments dropped as too many policy versions behind", (double)s.segments_dropped_lag);
        one(f, x, "rollout_policy_lag_mean", "gauge",
            "Mean policy versions behind of the segments sent", s.policy_lag_mean);
    }
    if (s.recording) {
        one(f, x, "rollout_record_waits_total", "counter", "Shard steps that waited for the disk",
            (double)s.record_waits);
        one(f, x, "rollout_record_dropped_steps_total", "counter",
            "Env steps not recorded (--record-full drop)", (double)s.record_dropped);
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
        if (cur->remote || cur->stream)
            ro__tb_scalar(w, "queues/learners", cur->learners);
        if (cur->remote) {
            ro__tb_scalar(w, "queues/envs_in_flight", cur->envs_in_flight);
            ro__tb_scalar(w, "queues/envs_unsent", cur->envs_unsent);
            ro__tb_scalar(w, "queues/oldest_wait_ms", (double)cur->oldest_wait_ns * 1e-6);
            ro__tb_scalar(w, "queues/queued_bytes", (double)cur->queued_bytes);
            ro__tb_scalar(w, "queues/batches_resent", (double)cur->batches_resent);
            ro__tb_scalar(w, "queues/spin_hits", (double)cur->spin_hits);
            ro__tb_scalar(w, "queues/spin_misses", (double)cur->spin_misses);
        }
        if (cur->stream) {
            ro__tb_scalar(w, "queues/segments_in_flight", cur->segments_in_flight);
            ro__tb_scalar(w, "queues/segments_unsent", cur->segments_unsent);
            ro__tb_scalar(w, "queues/segments_acked", (double)cur->segments_acked);
            ro__tb_scalar(w, "queues/stream_waits", (double)cur->stream_waits);
            ro__tb_scalar(w, "queues/segments_dropped_lag", (double)cur->segments_dropped_lag);
            ro__tb_scalar(w, "rollout/policy_lag_mean", cur->policy_lag_mean);
        }
        if (cur->recording) {
            ro__tb_scalar(w, "queues/record_waits", (double)cur->record_waits);
            ro__tb_scalar(w, "queues/record_dropped", (double)cur->record_dropped);
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
