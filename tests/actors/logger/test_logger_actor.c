/* The logger's episode lines: the fast formatter writes exactly what the
 * fprintf format writes, and values it does not handle (fractions, -0,
 * non-finite, beyond 2^53) still go through fprintf; a NaN or infinite
 * return is null (JSON has no such numbers: every line parses strictly).
 * With throughput_only (--metrics-every) only throughput lines, each with
 * its interval's episodes and mean return (null when none ended). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "actors/logger/logger_actor.h"
#include "runtime/metrics_ring.h"

static void no_sample(void *ctx, ro_logger_sample_t *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
}

/* What the logger wrote before it formatted lines itself (with null for a
 * return that is not a finite number). */
static void reference(char *buf, size_t len, uint64_t dt_ns, const ro_metric_t *m)
{
    char ret[32] = "null";
    if (isfinite(m->value))
        snprintf(ret, sizeof ret, "%.17g", m->value);
    snprintf(buf, len,
             "{\"type\":\"episode\",\"t\":%.6f,\"env\":%u,\"episode\":%llu,"
             "\"return\":%s,\"length\":%u,\"terminated\":%s,\"truncated\":%s,"
             "\"policy_first\":%llu,\"policy_last\":%llu}\n",
             (double)dt_ns * 1e-9, m->env, (unsigned long long)m->episode, ret, m->length,
             m->terminated ? "true" : "false", m->truncated ? "true" : "false",
             (unsigned long long)m->policy_first, (unsigned long long)m->policy_last);
}

static void test_episode_lines_match_fprintf(void **state)
{
    (void)state;
    const double values[] = {22.0,
                             -200.0,
                             0.0,
                             500.0,
                             9007199254740991.0,
                             -9007199254740991.0,
                             -0.0,
                             1.5,
                             -1261.1646023988724,
                             1e300,
                             9007199254740992.0,
                             INFINITY,
                             -INFINITY,
                             NAN};
    const uint64_t dts[] = {
        0, 999, 1234567, 2000000000, 3600123456789ull, 17, 42000, 1, 999999999, 5, 6, 7, 8, 9};
    const size_t n = sizeof values / sizeof values[0];

    char path[] = "/tmp/ro-test-logger-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);

    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ro_metrics_ring_t ring;
    assert_int_equal(ro__metrics_ring_init(&ring, 64), 0);
    ro_logger_t lg;
    ro_logger_opts_t o = {.metrics_path = path,
                          .interval_s = 1000,
                          .quiet = true,
                          .episode_lines = true,
                          .sample = no_sample};
    char err[256];
    assert_int_equal(ro__logger_init(&lg, &loop, &ring, 1, &o, err, sizeof err), 0);
    ro__logger_start(&lg);

    char want[64][320];
    for (size_t i = 0; i < n; i++) {
        ro_metric_t m = {
            .kind = RO_METRIC_EPISODE,
            .env = (uint32_t)(i * 7919u),
            .episode = i == 3 ? UINT64_MAX : i * 1000003u,
            .value = values[i],
            .length = i == 4 ? UINT32_MAX : (uint32_t)(i * 13),
            .terminated = (uint8_t)(i & 1),
            .truncated = (uint8_t)((i >> 1) & 1),
            .t_ns = lg.t0_ns + dts[i],
            .policy_first = i == 5 ? UINT64_MAX : i / 2,
            .policy_last = i == 6 ? UINT64_MAX : i,
        };
        reference(want[i], sizeof want[i], dts[i], &m);
        assert_true(ro__metrics_ring_push(&ring, &m));
    }
    assert_int_equal(ro__logger_finish(&lg), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    ro__metrics_ring_free(&ring);

    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    for (size_t i = 0; i < n; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        if (strcmp(line, want[i]) != 0) {
            fprintf(stderr, "value %.17g:\n got  %s want %s", values[i], line, want[i]);
            fail();
        }
    }
    /* Then the closing throughput line. */
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(strstr(line, "\"type\":\"throughput\""));
    fclose(f);
    unlink(path);
}

/* Counters a throughput line samples: episodes and their return sum. */
typedef struct counters {
    uint64_t episodes;
    double return_sum;
} counters_t;

static void sample_counters(void *ctx, ro_logger_sample_t *out)
{
    const counters_t *c = ctx;
    memset(out, 0, sizeof *out);
    out->episodes = c->episodes;
    out->return_sum = c->return_sum;
    out->steps = 1000;
}

/* One throughput-only logger fed an episode and an env failure record, its
 * closing line read back into line. */
static void throughput_only_run(counters_t *c, char *line, size_t len, int *nlines)
{
    char path[] = "/tmp/ro-test-logger-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ro_metrics_ring_t ring;
    assert_int_equal(ro__metrics_ring_init(&ring, 64), 0);
    ro_logger_t lg;
    ro_logger_opts_t o = {.metrics_path = path,
                          .interval_s = 1000,
                          .throughput_only = true,
                          .quiet = true,
                          .sample = sample_counters,
                          .sample_ctx = c};
    char err[256];
    assert_int_equal(ro__logger_init(&lg, &loop, &ring, 1, &o, err, sizeof err), 0);
    ro__logger_start(&lg);
    ro_metric_t ep = {.kind = RO_METRIC_EPISODE, .env = 1, .value = 3.0, .length = 3};
    ro_metric_t fail = {.kind = RO_METRIC_ENV_FAIL, .env = 2};
    assert_true(ro__metrics_ring_push(&ring, &ep));
    assert_true(ro__metrics_ring_push(&ring, &fail));
    assert_int_equal(ro__logger_finish(&lg), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    ro__metrics_ring_free(&ring);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    *nlines = 0;
    char buf[1024];
    while (fgets(buf, sizeof buf, f)) {
        snprintf(line, len, "%s", buf);
        (*nlines)++;
    }
    fclose(f);
    unlink(path);
}

static void test_throughput_only(void **state)
{
    (void)state;
    char line[1024];
    int nlines;
    counters_t none = {0, 0.0};
    throughput_only_run(&none, line, sizeof line, &nlines);
    assert_int_equal(nlines, 1); /* no episode or env_failure line */
    assert_non_null(strstr(line, "\"type\":\"throughput\""));
    assert_non_null(strstr(line, "\"env_failures\":1,")); /* counted all the same */
    assert_non_null(strstr(line, "\"interval_episodes\":0,\"interval_mean_return\":null"));
    counters_t four = {4, -10.0};
    throughput_only_run(&four, line, sizeof line, &nlines);
    assert_int_equal(nlines, 1);
    assert_non_null(strstr(line, "\"interval_episodes\":4,\"interval_mean_return\":-2.5"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_episode_lines_match_fprintf),
        cmocka_unit_test(test_throughput_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
