/*
 * rollout-learner's --tensorboard and --prometheus: what it counts (steps
 * answered, forward passes and their rows, episodes and returns, spin hits,
 * stream segments) as TensorBoard events each --metrics-interval and as a
 * Prometheus endpoint rendered at each scrape. The same modules as the
 * node's logger (metrics/, wire/http_endpoint.h); the learner has no
 * logger actor: its counters are the loop thread's own.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "learner/learner.h"
#include "metrics/prom_text.h"
#include "ro_build_config.h"
#include "runtime/clock.h"
#include "runtime/error.h"

typedef struct totals {
    uint64_t episodes, segments, version_max;
    double return_sum;
    uint32_t nodes; /* welcomed now */
} totals_t;

static void sum_nodes(const learner_t *L, totals_t *t)
{
    memset(t, 0, sizeof *t);
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        const node_t *n = &L->nodes[i];
        t->episodes += n->episodes;
        t->return_sum += n->return_sum;
        t->segments += n->rx.segments;
        if (n->rx.segments && n->rx.version_max > t->version_max)
            t->version_max = n->rx.version_max;
        t->nodes += n->link.welcomed;
    }
}

static void one(FILE *f, const learner_metrics_t *m, const char *name, const char *type,
                const char *help, double v)
{
    ro__prom_family(f, name, type, help);
    ro__prom_sample(f, name, m->labels, v);
}

static void histo_family(FILE *f, const learner_metrics_t *m, const char *name, const char *help,
                         const ro_histo_t *all, const ro_histo_t *iv)
{
    ro_histo_t h = *all;
    ro__histo_merge(&h, iv);
    ro__prom_family(f, name, "histogram", help);
    ro__prom_histo(f, name, m->labels, &h);
}

static void render(void *ctx, FILE *f)
{
    learner_t *L = ctx;
    learner_metrics_t *m = &L->met;
    totals_t t;
    sum_nodes(L, &t);
    ro__prom_family(f, "rollout_build_info", "gauge", "rollout's version (always 1)");
    char lab[sizeof m->labels + 64];
    snprintf(lab, sizeof lab, "%s", m->labels);
    ro__prom_label(lab, sizeof lab, "version", RO_VERSION);
    ro__prom_sample(f, "rollout_build_info", lab, 1);
    one(f, m, "rollout_steps_total", "counter", "Env steps answered (SEED) or received (stream)",
        (double)L->steps);
    one(f, m, "rollout_forward_batches_total", "counter",
        "Forward passes (SEED) or segment frames taken (stream)", (double)L->batches);
    one(f, m, "rollout_episodes_total", "counter", "Episodes finished in the nodes served",
        (double)t.episodes);
    one(f, m, "rollout_episode_return_sum_total", "counter",
        "Sum of those episodes' returns (with rollout_episodes_total: the mean)", t.return_sum);
    one(f, m, "rollout_nodes_connected", "gauge", "Nodes connected now", t.nodes);
    one(f, m, "rollout_spin_hits_total", "counter",
        "Loop spins that found the next observations in time", (double)L->spin.hits);
    one(f, m, "rollout_spin_misses_total", "counter", "Loop spins that ran out",
        (double)L->spin.misses);
    one(f, m, "rollout_segments_total", "counter", "Stream segments received", (double)t.segments);
    one(f, m, "rollout_segment_policy_version_max", "gauge",
        "Newest policy version in a stream segment received", (double)t.version_max);
    histo_family(f, m, "rollout_batch_rows", "Env rows per forward pass (SEED)", &m->rows_all,
                 &m->rows_iv);
    histo_family(f, m, "rollout_episode_return", "Returns of the finished episodes", &m->ret_all,
                 &m->ret_iv);
}

static double per(double a, double b)
{
    return b > 0 ? a / b : NAN; /* NaN: left out of the event */
}

/* One TensorBoard event for the interval that ends now. */
static void interval(learner_t *L)
{
    learner_metrics_t *m = &L->met;
    uint64_t now = ro__now_ns();
    double dt = (double)(now - m->last_ns) * 1e-9;
    totals_t t;
    sum_nodes(L, &t);
    ro_tb_writer_t *w = ro__exporters_tb(&m->out);
    if (w) {
        ro__tb_scalar(w, "learner/steps_per_s", per((double)(L->steps - m->last_steps), dt));
        ro__tb_scalar(
            w, "learner/mean_batch",
            per((double)(L->steps - m->last_steps), (double)(L->batches - m->last_batches)));
        ro__tb_scalar(w, "learner/episodes", (double)t.episodes);
        ro__tb_scalar(w, "learner/episode_return_mean",
                      per(t.return_sum - m->last_return, (double)(t.episodes - m->last_episodes)));
        ro__tb_scalar(w, "learner/nodes_connected", t.nodes);
        ro__tb_scalar(w, "learner/spin_hits", (double)L->spin.hits);
        ro__tb_scalar(w, "learner/spin_misses", (double)L->spin.misses);
        if (t.segments) {
            ro__tb_scalar(w, "learner/segments", (double)t.segments);
            ro__tb_scalar(w, "learner/segment_policy_version_max", (double)t.version_max);
        }
        ro__tb_histo(w, "learner/batch_rows", &m->rows_iv);
        ro__tb_histo(w, "learner/episode_return", &m->ret_iv);
        ro__exporters_tb_write(&m->out, L->steps);
    }
    ro__histo_merge(&m->ret_all, &m->ret_iv);
    ro__histo_merge(&m->rows_all, &m->rows_iv);
    ro__histo_reset(&m->ret_iv);
    ro__histo_reset(&m->rows_iv);
    m->last_ns = now;
    m->last_steps = L->steps;
    m->last_batches = L->batches;
    m->last_episodes = t.episodes;
    m->last_return = t.return_sum;
}

static void on_timer(uv_timer_t *h)
{
    interval(h->data);
}

int ro__learner_metrics_open(learner_t *L, char *err, size_t errlen)
{
    learner_metrics_t *m = &L->met;
    if (!L->cfg.tensorboard && !L->cfg.prometheus)
        return 0;
    ro__histo_init(&m->ret_iv, ro__histo_return_edges, ro__histo_return_nedges);
    ro__histo_init(&m->ret_all, ro__histo_return_edges, ro__histo_return_nedges);
    ro__histo_init(&m->rows_iv, ro__histo_size_edges, ro__histo_size_nedges);
    ro__histo_init(&m->rows_all, ro__histo_size_edges, ro__histo_size_nedges);
    ro__prom_label(m->labels, sizeof m->labels, "learner", L->cfg.name);
    int rc = ro__exporters_open(&m->out, &L->loop, L->cfg.tensorboard, L->cfg.prometheus,
                                "rollout-learner", render, L, err, errlen);
    if (rc)
        return rc;
    m->on = true;
    m->last_ns = ro__now_ns();
    uv_timer_init(&L->loop, &m->timer); /* cannot fail */
    m->timer.data = L;
    uint64_t ms = (uint64_t)(L->cfg.metrics_interval * 1000.0);
    uv_timer_start(&m->timer, on_timer, ms, ms);
    return 0;
}

int ro__learner_metrics_close(learner_t *L)
{
    learner_metrics_t *m = &L->met;
    if (m->on) {
        interval(L); /* the last one, up to the end */
        uv_close((uv_handle_t *)&m->timer, NULL);
        m->on = false;
    }
    return ro__exporters_close(&m->out);
}
