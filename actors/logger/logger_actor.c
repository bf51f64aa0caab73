#include "actors/logger/logger_actor.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/text.h"

#define DRAIN_MS 50
#define STATUS_TTY_NS 500000000ull
#define STATUS_LINE_NS 2000000000ull

static double secs(const ro_logger_t *lg, uint64_t t_ns)
{
    return t_ns > lg->t0_ns ? (double)(t_ns - lg->t0_ns) * 1e-9 : 0.0;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/*
 * episode_line writes the same line as the fprintf below ("t" to the
 * microsecond, "return" as %.17g), formatting the integers itself: at
 * hundreds of thousands of episodes a second (CartPole) fprintf's cost,
 * about 0.4 us a line, took a tenth of a 2-core machine from the workers.
 * A return that is not a whole number below 2^53 still goes through
 * snprintf. Returns false to let the caller use fprintf instead.
 */
static bool episode_line(ro_logger_t *lg, const ro_metric_t *m)
{
    const double v = m->value;
    if (!isfinite(v) || fabs(v) >= 9007199254740992.0 || v != floor(v) || (v == 0 && signbit(v)))
        return false;
    char buf[320], *p = buf; /* the longest line is about 260 bytes */
    uint64_t us = m->t_ns > lg->t0_ns ? (m->t_ns - lg->t0_ns + 500) / 1000 : 0;
    p = put_str(p, "{\"type\":\"episode\",\"t\":");
    p = ro__text_u64(p, us / 1000000);
    *p++ = '.';
    for (uint64_t d = 100000, f = us % 1000000; d; d /= 10)
        *p++ = (char)('0' + f / d % 10);
    p = put_str(p, ",\"env\":");
    p = ro__text_u64(p, m->env);
    p = put_str(p, ",\"episode\":");
    p = ro__text_u64(p, m->episode);
    p = put_str(p, ",\"return\":");
    if (v < 0)
        *p++ = '-';
    p = ro__text_u64(p, (uint64_t)fabs(v));
    p = put_str(p, ",\"length\":");
    p = ro__text_u64(p, m->length);
    p = put_str(p, m->terminated ? ",\"terminated\":true" : ",\"terminated\":false");
    p = put_str(p, m->truncated ? ",\"truncated\":true" : ",\"truncated\":false");
    p = put_str(p, ",\"policy_first\":");
    p = ro__text_u64(p, m->policy_first);
    p = put_str(p, ",\"policy_last\":");
    p = ro__text_u64(p, m->policy_last);
    p = put_str(p, "}\n");
    fwrite(buf, 1, (size_t)(p - buf), lg->metrics);
    return true;
}

static void on_record(ro_logger_t *lg, const ro_metric_t *m)
{
    if (m->kind == RO_METRIC_ENV_FAIL)
        lg->env_failures++;
    if (lg->throughput_only)
        return;
    if (m->kind == RO_METRIC_EPISODE) {
        if (lg->metrics && lg->episode_lines && !episode_line(lg, m)) {
            /* A NaN or infinite return (an env's reward) is null: JSON has
             * no such numbers, and every line must parse strictly. */
            fprintf(lg->metrics,
                    "{\"type\":\"episode\",\"t\":%.6f,\"env\":%u,\"episode\":%llu,\"return\":",
                    secs(lg, m->t_ns), m->env, (unsigned long long)m->episode);
            ro__json_double(lg->metrics, m->value);
            fprintf(lg->metrics,
                    ",\"length\":%u,\"terminated\":%s,\"truncated\":%s,"
                    "\"policy_first\":%llu,\"policy_last\":%llu}\n",
                    m->length, m->terminated ? "true" : "false", m->truncated ? "true" : "false",
                    (unsigned long long)m->policy_first, (unsigned long long)m->policy_last);
        }
    } else if (m->kind == RO_METRIC_ENV_FAIL) {
        if (lg->metrics)
            fprintf(lg->metrics,
                    "{\"type\":\"env_failure\",\"t\":%.6f,\"env\":%u,\"episode\":%llu,"
                    "\"step\":%u,\"policy_first\":%llu,\"policy_last\":%llu}\n",
                    secs(lg, m->t_ns), m->env, (unsigned long long)m->episode, m->length,
                    (unsigned long long)m->policy_first, (unsigned long long)m->policy_last);
    }
}

/* A mean, or null when nothing was counted (JSON has no NaN). */
static void mean_or_null(FILE *f, double sum, uint64_t n)
{
    if (n && isfinite(sum / (double)n))
        fprintf(f, "%.17g", sum / (double)n);
    else
        fputs("null", f);
}

/*
 * metrics_field writes an ABI 2 env's per-episode metrics into a throughput
 * line: "metrics":{"name":{"mean":m,"episodes":k,"interval_mean":mi,
 * "interval_episodes":ki},...}, the mean over every episode that reported
 * the metric so far (as the summary's) and over those of the interval.
 */
static void metrics_field(ro_logger_t *lg, const ro_logger_sample_t *cur)
{
    if (!cur->nmetrics)
        return;
    fputs(",\"metrics\":{", lg->metrics);
    for (uint32_t m = 0; m < cur->nmetrics; m++) {
        /* Names are [A-Za-z0-9_] (checked at load): nothing to escape. */
        fprintf(lg->metrics, "%s\"%s\":{\"mean\":", m ? "," : "", cur->metric_name[m]);
        mean_or_null(lg->metrics, cur->metric_sum[m], cur->metric_count[m]);
        uint64_t dn = cur->metric_count[m] - lg->last.metric_count[m];
        fprintf(lg->metrics,
                ",\"episodes\":%llu,\"interval_mean\":", (unsigned long long)cur->metric_count[m]);
        mean_or_null(lg->metrics, cur->metric_sum[m] - lg->last.metric_sum[m], dn);
        fprintf(lg->metrics, ",\"interval_episodes\":%llu}", (unsigned long long)dn);
    }
    fputc('}', lg->metrics);
}

static void throughput_line(ro_logger_t *lg, uint64_t now)
{
    ro_logger_sample_t cur;
    lg->sample(lg->sample_ctx, &cur);
    double dt = (double)(now - lg->last_ns) * 1e-9;
    uint64_t db = cur.batches - lg->last.batches;
    uint64_t de = cur.episodes - lg->last.episodes;
    if (lg->metrics) {
        fprintf(lg->metrics,
                "{\"type\":\"throughput\",\"t\":%.6f,\"steps\":%llu,\"sps\":%.1f,"
                "\"episodes\":%llu,\"batches\":%llu,\"mean_batch\":%.2f,\"dropped\":%llu,"
                "\"env_failures\":%llu,\"interval_episodes\":%llu,\"interval_mean_return\":",
                secs(lg, now), (unsigned long long)cur.steps,
                dt > 0 ? (double)(cur.steps - lg->last.steps) / dt : 0.0,
                (unsigned long long)cur.episodes, (unsigned long long)cur.batches,
                db ? (double)(cur.rows - lg->last.rows) / (double)db : 0.0,
                (unsigned long long)ro__logger_dropped(lg), (unsigned long long)lg->env_failures,
                (unsigned long long)de);
        /* No episode ended in the interval: no mean (JSON null, never NaN). */
        double mean = de ? (cur.return_sum - lg->last.return_sum) / (double)de : 0.0;
        if (de && isfinite(mean))
            fprintf(lg->metrics, "%.17g", mean);
        else
            fputs("null", lg->metrics);
        if (cur.remote)
            fprintf(lg->metrics,
                    ",\"learners\":%u,\"envs_in_flight\":%u,\"envs_unsent\":%u,"
                    "\"oldest_wait_ms\":%.3f,\"queued_bytes\":%llu,\"batches_resent\":%llu",
                    cur.hub.learners, cur.hub.envs_in_flight, cur.hub.envs_unsent,
                    (double)cur.hub.oldest_wait_ns * 1e-6, (unsigned long long)cur.hub.queued_bytes,
                    (unsigned long long)cur.hub.batches_resent);
        if (cur.recording)
            fprintf(lg->metrics, ",\"record_waits\":%llu,\"record_dropped\":%llu",
                    (unsigned long long)cur.record_waits, (unsigned long long)cur.record_dropped);
        if (cur.stream)
            fprintf(lg->metrics,
                    ",\"learners\":%u,\"segments_in_flight\":%u,\"segments_unsent\":%u,"
                    "\"segments_acked\":%llu,\"segments_dropped_lag\":%llu,\"stream_waits\":%llu",
                    cur.hub.learners, cur.hub.segments_in_flight, cur.hub.segments_unsent,
                    (unsigned long long)cur.hub.segments_acked,
                    (unsigned long long)cur.hub.segments_dropped_lag,
                    (unsigned long long)cur.stream_waits);
        metrics_field(lg, &cur);
        fputs("}\n", lg->metrics);
    }
    if (lg->exporting)
        ro__logger_export_interval(&lg->export, &cur, &lg->last, dt);
    lg->last = cur;
    lg->last_ns = now;
}

static void status(ro_logger_t *lg, uint64_t now, bool final)
{
    ro_logger_sample_t cur;
    lg->sample(lg->sample_ctx, &cur);
    double dt = (double)(now - lg->status_last_ns) * 1e-9;
    if (dt > 0)
        lg->sps_recent = (double)(cur.steps - lg->status_last.steps) / dt;
    if (cur.episodes > lg->status_last.episodes)
        lg->return_recent = (cur.return_sum - lg->status_last.return_sum) /
                            (double)(cur.episodes - lg->status_last.episodes);
    lg->status_last = cur;
    lg->status_last_ns = now;
    char line[240], mean[32] = "      n/a"; /* no episode finished yet, or NaN */
    if (cur.episodes > 0 && isfinite(lg->return_recent))
        snprintf(mean, sizeof mean, "%9.2f", lg->return_recent);
    snprintf(line, sizeof line,
             "[%7.1fs] steps %12llu | %10.0f steps/s | episodes %9llu | mean return %s",
             secs(lg, now), (unsigned long long)cur.steps, lg->sps_recent,
             (unsigned long long)cur.episodes, mean);
    if (cur.remote) {
        size_t k = strlen(line);
        snprintf(line + k, sizeof line - k, " | learners %u, envs waiting %u", cur.hub.learners,
                 cur.hub.envs_in_flight + cur.hub.envs_unsent);
    }
    if (lg->status_tty)
        fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
    else
        fprintf(stderr, "%s\n", line);
}

static void drain(ro_logger_t *lg)
{
    ro_metric_t m;
    for (uint32_t i = 0; i < lg->nrings; i++)
        while (ro__metrics_ring_pop(&lg->rings[i], &m))
            on_record(lg, &m);
}

uint64_t ro__logger_dropped(ro_logger_t *lg)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < lg->nrings; i++)
        n += ro__metrics_ring_dropped(&lg->rings[i]);
    return n;
}

static void on_timer(uv_timer_t *t)
{
    ro_logger_t *lg = t->data;
    drain(lg);
    uint64_t now = ro__now_ns();
    if (now >= lg->next_tput_ns) {
        throughput_line(lg, now);
        lg->next_tput_ns = now + lg->interval_ns;
        /* Out to the file once per interval, so that the file follows a
         * running node (tail -f, a test watching it); write errors show at
         * the finish. */
        if (lg->metrics)
            fflush(lg->metrics);
    }
    if ((lg->status_tty || lg->status_lines) && now >= lg->next_status_ns) {
        status(lg, now, false);
        lg->next_status_ns = now + (lg->status_tty ? STATUS_TTY_NS : STATUS_LINE_NS);
    }
}

int ro__logger_init(ro_logger_t *lg, uv_loop_t *loop, ro_metrics_ring_t *rings, uint32_t nrings,
                    const ro_logger_opts_t *o, char *err, size_t errlen)
{
    memset(lg, 0, sizeof *lg);
    lg->rings = rings;
    lg->nrings = nrings;
    lg->sample = o->sample;
    lg->sample_ctx = o->sample_ctx;
    lg->interval_ns = (uint64_t)(o->interval_s * 1e9);
    lg->throughput_only = o->throughput_only;
    lg->episode_lines = o->episode_lines;
    if (o->metrics_path) {
        lg->metrics = fopen(o->metrics_path, "w");
        if (!lg->metrics) {
            snprintf(err, errlen, "--metrics '%s': cannot open for writing (%s)", o->metrics_path,
                     strerror(errno));
            return RO_EIO;
        }
        /* A large buffer: the loop writes in few syscalls. */
        setvbuf(lg->metrics, NULL, _IOFBF, 1 << 20);
    }
    if (o->tensorboard || o->prometheus) {
        ro_logger_export_opts_t xo = {
            .tensorboard = o->tensorboard,
            .prometheus = o->prometheus,
            .node_index = o->node_index,
            .numa_node = o->numa_node,
            .env = o->env,
            .sample = o->sample,
            .sample_ctx = o->sample_ctx,
            .rings = rings,
            .nrings = nrings,
            .env_failures = &lg->env_failures,
        };
        int rc = ro__logger_export_open(&lg->export, loop, &xo, err, errlen);
        if (rc) {
            if (lg->metrics)
                fclose(lg->metrics);
            lg->metrics = NULL;
            return rc;
        }
        lg->exporting = true;
    }
    if (!o->quiet) {
        lg->status_tty = isatty(STDERR_FILENO);
        lg->status_lines = !lg->status_tty;
    }
    uv_timer_init(loop, &lg->timer);
    lg->timer.data = lg;
    return 0;
}

void ro__logger_start(ro_logger_t *lg)
{
    lg->t0_ns = ro__now_ns();
    lg->last_ns = lg->status_last_ns = lg->t0_ns;
    lg->next_tput_ns = lg->t0_ns + lg->interval_ns;
    lg->next_status_ns = lg->t0_ns + (lg->status_tty ? STATUS_TTY_NS : STATUS_LINE_NS);
    uv_timer_start(&lg->timer, on_timer, DRAIN_MS, DRAIN_MS);
}

int ro__logger_finish(ro_logger_t *lg)
{
    if (lg->closed)
        return 0;
    lg->closed = true;
    uv_timer_stop(&lg->timer);
    drain(lg);
    uint64_t now = ro__now_ns();
    throughput_line(lg, now);
    if (lg->status_tty || lg->status_lines)
        status(lg, now, true);
    int rc = 0;
    if (lg->metrics) {
        if (fflush(lg->metrics) != 0 || ferror(lg->metrics))
            rc = RO_EIO;
        if (fclose(lg->metrics) != 0)
            rc = RO_EIO;
        lg->metrics = NULL;
    }
    if (lg->exporting && ro__logger_export_close(&lg->export) != 0)
        rc = RO_EIO;
    uv_close((uv_handle_t *)&lg->timer, NULL);
    return rc;
}

void ro__logger_abandon(ro_logger_t *lg)
{
    if (lg->closed)
        return;
    lg->closed = true;
    if (lg->metrics)
        fclose(lg->metrics);
    lg->metrics = NULL;
    if (lg->exporting)
        ro__logger_export_close(&lg->export);
    lg->exporting = false;
}
