/* Sampling actions from a policy (src/policy/policy.c): categorical and
 * Gaussian heads and the random policy draw from the right distributions
 * (chi-square and moment tests on fixed seeds, so deterministic), clip to
 * the action bounds, and move each row's rng by exactly the draws they
 * use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/params.h"
#include "policy_fixture.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("policy_sampling");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

/* write_params builds a policy file whose head weights are zero, so the
 * head outputs are its bias (logits or means) whatever the input. */
static const char *write_const_head(const char *name, uint32_t obs_dim, ro_space_kind_t kind,
                                    uint32_t nout, const float *head_bias, const float *log_std)
{
    ro_policy_params_t pp = {.activation = RO_ACT_TANH,
                             .obs_dim = obs_dim,
                             .action_kind = kind,
                             .action_dim = nout,
                             .nlayers = 2};
    pp.layers[0].in = obs_dim;
    pp.layers[0].out = 8;
    pp.layers[1].in = 8;
    pp.layers[1].out = nout;
    assert_int_equal(ro__policy_params_alloc(&pp), 0);
    for (uint32_t i = 0; i < 8 * obs_dim; i++)
        pp.layers[0].weight[i] = 0.1f * (float)(i % 7) - 0.3f;
    for (uint32_t i = 0; i < 8; i++)
        pp.layers[0].bias[i] = 0.05f * (float)i;
    memset(pp.layers[1].weight, 0, sizeof(float) * 8 * nout);
    memcpy(pp.layers[1].bias, head_bias, sizeof(float) * nout);
    if (kind == RO_SPACE_BOX)
        memcpy(pp.log_std, log_std, sizeof(float) * nout);
    char err[ERRLEN] = "";
    const char *path = tmp_path(name);
    assert_int_equal(ro__policy_params_save(&pp, path, err, sizeof err), 0);
    ro__policy_params_free(&pp);
    return path;
}

/* run_draws samples `total` actions from p, rows spread over a batch of
 * `batch` with one rng per row, and checks that each row's rng moved by
 * exactly `draws` 64-bit outputs per call. */
static void run_draws(const ro_policy_t *p, uint32_t batch, uint32_t calls, uint32_t draws,
                      int32_t *ai, float *af)
{
    const uint32_t od = ro__policy_obs_dim(p), ad = ro__policy_act_dim(p);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, batch), 0);
    ro_rng_t *rng = malloc(sizeof(ro_rng_t) * batch);
    ro_rng_t **rp = malloc(sizeof(ro_rng_t *) * batch);
    for (uint32_t i = 0; i < batch; i++) {
        ro__rng_init(&rng[i], ro__seed_mix(77, i, RO_STREAM_ACTION));
        rp[i] = &rng[i];
    }
    for (uint32_t c = 0; c < calls; c++) {
        fill_inputs(ro__policy_ws_input(ws), (size_t)batch * od, c);
        ro_rng_t before = rng[c % batch];
        ro__policy_act(p, ws, batch, rp, ai ? ai + (size_t)c * batch : NULL,
                       af ? af + (size_t)c * batch * ad : NULL, NULL, NULL);
        for (uint32_t d = 0; d < draws; d++)
            ro__rng_next(&before);
        assert_memory_equal(&before, &rng[c % batch], sizeof before);
    }
    free(rp);
    free(rng);
    ro__policy_ws_free(ws);
}

/* chi_square of counts against probabilities. */
static double chi_square(const uint64_t *count, const double *prob, uint32_t k, uint64_t n)
{
    double chi = 0.0;
    for (uint32_t j = 0; j < k; j++) {
        double e = prob[j] * (double)n;
        chi += ((double)count[j] - e) * ((double)count[j] - e) / e;
    }
    return chi;
}

static void test_categorical_distribution(void **state)
{
    (void)state;
    const float logits[5] = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f};
    const char *path = write_const_head("cat.pb", 3, RO_SPACE_DISCRETE, 5, logits, NULL);
    ro_space_t obs = obs_box(3), act = act_discrete(5);
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .params_path = path};
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    const uint32_t batch = 100, calls = 2000;
    int32_t *a = malloc(sizeof(int32_t) * batch * calls);
    run_draws(p, batch, calls, 1, a, NULL);
    double prob[5], z = 0;
    for (int j = 0; j < 5; j++)
        z += exp(logits[j]);
    for (int j = 0; j < 5; j++)
        prob[j] = exp(logits[j]) / z;
    uint64_t count[5] = {0};
    for (uint32_t i = 0; i < batch * calls; i++) {
        assert_in_range(a[i], 0, 4);
        count[a[i]]++;
    }
    /* 4 degrees of freedom: P(chi2 > 40) is about 4e-8. The seeds are
     * fixed, so this is deterministic; a wrong index, an off-by-one in the
     * CDF or a missing max subtraction moves it far past. */
    double chi = chi_square(count, prob, 5, (uint64_t)batch * calls);
    print_message("categorical chi2 = %.2f (df 4)\n", chi);
    assert_true(chi < 40.0);
    free(a);
    ro__policy_free(p);
}

static void test_categorical_extreme_logits(void **state)
{
    (void)state;
    /* Huge logit gaps: exp underflows to 0 for all but one; and the max
     * subtraction keeps exp from overflowing. */
    const float logits[4] = {-1000.0f, 500.0f, -1000.0f, 400.0f};
    const char *path = write_const_head("cat2.pb", 2, RO_SPACE_DISCRETE, 4, logits, NULL);
    ro_space_t obs = obs_box(2), act = act_discrete(4);
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .params_path = path};
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    int32_t a[64 * 50];
    run_draws(p, 64, 50, 1, a, NULL);
    for (int i = 0; i < 64 * 50; i++)
        assert_int_equal(a[i], 1);
    ro__policy_free(p);
}

static void test_gaussian_distribution(void **state)
{
    (void)state;
    const float mean[2] = {1.0f, -2.0f}, log_std[2] = {logf(0.5f), logf(2.0f)};
    const float lo[2] = {-100.0f, -100.0f}, hi[2] = {100.0f, 100.0f};
    const char *path = write_const_head("gauss.pb", 4, RO_SPACE_BOX, 2, mean, log_std);
    ro_space_t obs = obs_box(4), act = act_box(2, lo, hi);
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .params_path = path};
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    const uint32_t batch = 50, calls = 2000, n = batch * calls;
    float *a = malloc(sizeof(float) * 2 * n);
    run_draws(p, batch, calls, 4, NULL, a); /* two normals per row, two draws each */
    for (int j = 0; j < 2; j++) {
        double s = 0, s2 = 0;
        for (uint32_t i = 0; i < n; i++) {
            s += a[2 * i + j];
            s2 += (double)a[2 * i + j] * a[2 * i + j];
        }
        double m = s / n, sd = sqrt(s2 / n - m * m), want_sd = exp(log_std[j]);
        print_message("dim %d: mean %.4f (want %.1f) std %.4f (want %.1f)\n", j, m, mean[j], sd,
                      want_sd);
        /* 6 standard errors: sd/sqrt(n) for the mean, sd/sqrt(2n) for sd. */
        assert_true(fabs(m - mean[j]) < 6 * want_sd / sqrt(n));
        assert_true(fabs(sd - want_sd) < 6 * want_sd / sqrt(2.0 * n));
    }
    free(a);
    ro__policy_free(p);
}

static void test_gaussian_clipping(void **state)
{
    (void)state;
    const float mean[3] = {0.0f, 5.0f, 0.0f}, log_std[3] = {0.0f, 0.0f, 0.0f};
    const float lo[3] = {-0.5f, -1.0f, -INFINITY}, hi[3] = {0.5f, 1.0f, INFINITY};
    const char *path = write_const_head("clip.pb", 2, RO_SPACE_BOX, 3, mean, log_std);
    ro_space_t obs = obs_box(2), act = act_box(3, lo, hi);
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .params_path = path};
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    const uint32_t batch = 40, calls = 500, n = batch * calls;
    float *a = malloc(sizeof(float) * 3 * n);
    run_draws(p, batch, calls, 6, NULL, a);
    uint32_t at_lo = 0, at_hi = 0, far = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (int j = 0; j < 3; j++)
            assert_true(a[3 * i + j] >= lo[j] && a[3 * i + j] <= hi[j]);
        at_lo += a[3 * i] == -0.5f;
        at_hi += a[3 * i] == 0.5f;
        assert_true(a[3 * i + 1] <= 1.0f);
        far += fabsf(a[3 * i + 2]) > 2.0f;
    }
    /* P(z < -0.5) = 0.3085; sd of the fraction ~ 0.0033 at n = 20000. */
    assert_true(fabs(at_lo / (double)n - 0.3085) < 0.02);
    assert_true(fabs(at_hi / (double)n - 0.3085) < 0.02);
    assert_true(far > 0); /* the unbounded dim is not clipped */
    free(a);
    ro__policy_free(p);
}

static void test_random_discrete(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(3), act = act_discrete(7);
    ro_policy_spec_t spec = {.kind = RO_POLICY_RANDOM};
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    const uint32_t batch = 70, calls = 1000, n = batch * calls;
    int32_t *a = malloc(sizeof(int32_t) * n);
    run_draws(p, batch, calls, 1, a, NULL);
    uint64_t count[7] = {0};
    double prob[7];
    for (int j = 0; j < 7; j++)
        prob[j] = 1.0 / 7;
    for (uint32_t i = 0; i < n; i++) {
        assert_in_range(a[i], 0, 6);
        count[a[i]]++;
    }
    double chi = chi_square(count, prob, 7, n);
    print_message("random discrete chi2 = %.2f (df 6)\n", chi);
    assert_true(chi < 45.0); /* df 6: P(chi2 > 45) ~ 5e-8 */
    free(a);
    char buf[32];
    ro__policy_describe(p, buf, sizeof buf);
    assert_string_equal(buf, "random");
    assert_int_equal(ro__policy_act_dim(p), 1);
    ro__policy_free(p);
}

static void test_random_box(void **state)
{
    (void)state;
    const float lo[4] = {-INFINITY, 0.0f, -INFINITY, 5.0f};
    const float hi[4] = {INFINITY, 5.0f, 3.0f, INFINITY};
    const float want_lo[4] = {-1.0f, 0.0f, -1.0f, 5.0f}, want_hi[4] = {1.0f, 5.0f, 3.0f, 7.0f};
    ro_space_t obs = obs_box(3), act = act_box(4, lo, hi);
    ro_policy_spec_t spec = {.kind = RO_POLICY_RANDOM};
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    const uint32_t batch = 33, calls = 1000, n = batch * calls;
    float *a = malloc(sizeof(float) * 4 * n);
    run_draws(p, batch, calls, 4, NULL, a);
    for (int j = 0; j < 4; j++) {
        double s = 0, s2 = 0, mn = INFINITY, mx = -INFINITY;
        for (uint32_t i = 0; i < n; i++) {
            double v = a[4 * i + j];
            s += v;
            s2 += v * v;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        double w = want_hi[j] - want_lo[j], m = s / n, var = s2 / n - m * m;
        assert_true(mn >= want_lo[j] && mx <= want_hi[j]);
        assert_true(mn < want_lo[j] + 0.01 * w && mx > want_hi[j] - 0.01 * w);
        assert_true(fabs(m - (want_lo[j] + want_hi[j]) / 2) < 6 * w / sqrt(12.0 * n));
        assert_true(fabs(var - w * w / 12) < 0.02 * w * w / 12);
    }
    assert_int_equal(ro__policy_act_dim(p), 4);
    free(a);
    ro__policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_categorical_distribution),
        cmocka_unit_test(test_categorical_extreme_logits),
        cmocka_unit_test(test_gaussian_distribution),
        cmocka_unit_test(test_gaussian_clipping),
        cmocka_unit_test(test_random_discrete),
        cmocka_unit_test(test_random_box),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
