/* Tests of the policy (src/policy/policy.c): the forward pass against a
 * reference, batch independence, seeded init, spec validation, describe,
 * and threads sharing one policy. Sampling: test_policy_sampling.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/params.h"
#include "policy_fixture.h"
#include "runtime/error.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("policy");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

/* reference_forward is the naive triple loop in double over the weights of
 * pp, for one row; mag gets, per output, the sum of |terms| of the head. */
static void reference_forward(const ro_policy_params_t *pp, const float *x, double *out,
                              double *mag)
{
    double a[2][1024];
    for (uint32_t k = 0; k < pp->obs_dim; k++)
        a[0][k] = x[k];
    int cur = 0;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        const ro_policy_layer_t *L = &pp->layers[l];
        const int head = l + 1 == pp->nlayers;
        for (uint32_t j = 0; j < L->out; j++) {
            double s = L->bias[j], m = fabs(s);
            for (uint32_t k = 0; k < L->in; k++) {
                double t = (double)L->weight[(size_t)j * L->in + k] * a[cur][k];
                s += t;
                m += fabs(t);
            }
            if (head) {
                out[j] = s;
                mag[j] = m;
            } else {
                a[!cur][j] = pp->activation == RO_ACT_TANH ? tanh(s) : (s > 0 ? s : 0);
            }
        }
        cur = !cur;
    }
}

/* policy_weights saves p and reads the weights back for the reference. */
static void policy_weights(const ro_policy_t *p, const ro_space_t *obs, const ro_space_t *act,
                           ro_policy_params_t *pp)
{
    char err[ERRLEN] = "";
    const char *path = tmp_path("ref.pb");
    assert_int_equal(ro__policy_save(p, path, err, sizeof err), 0);
    int rc = ro__policy_params_load(pp, path, obs, act, err, sizeof err);
    if (rc != 0)
        fail_msg("load: %s", err);
}

static void check_forward(uint32_t obs_dim, uint32_t h0, uint32_t h1, ro_activation_t actv,
                          const ro_space_t *act, ro_gemm_t gemm)
{
    ro_space_t obs = obs_box(obs_dim);
    ro_policy_spec_t spec = mlp_spec(h0, h1, actv, 1234 + obs_dim + h0);
    spec.gemm = gemm;
    ro_policy_t *p = new_policy(&spec, &obs, act);
    ro_policy_params_t pp;
    policy_weights(p, &obs, act, &pp);
    const uint32_t nout = act->kind == RO_SPACE_DISCRETE ? act->n : (uint32_t)ro_space_size(act);
    const uint32_t batches[] = {1, 2, 5, 7, 48, 49, 64, 65, 130, 257};
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, 257), 0);
    float *out = malloc(257 * sizeof(float) * nout);
    double ref[64], mag[64];
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        const uint32_t n = batches[b];
        fill_inputs(ro__policy_ws_input(ws), (size_t)n * obs_dim, n);
        ro__policy_forward(p, ws, n, out, NULL);
        for (uint32_t i = 0; i < n; i++) {
            reference_forward(&pp, ro__policy_ws_input(ws) + (size_t)i * obs_dim, ref, mag);
            for (uint32_t j = 0; j < nout; j++) {
                double got = out[(size_t)i * nout + j];
                if (!(fabs(got - ref[j]) <= 1e-4 * (fabs(ref[j]) + mag[j]) + 1e-12))
                    fail_msg("obs %u hidden %u,%u act %d batch %u row %u out %u: %.9g vs %.9g",
                             obs_dim, h0, h1, (int)actv, n, i, j, got, ref[j]);
            }
        }
    }
    free(out);
    ro__policy_ws_free(ws);
    ro__policy_params_free(&pp);
    ro__policy_free(p);
}

static void test_forward_matches_reference(void **state)
{
    (void)state;
    static const float lo[3] = {-2, -2, -2}, hi[3] = {2, 2, 2};
    ro_space_t disc = act_discrete(5), box = act_box(3, lo, hi);
    const uint32_t cfg[][3] = {{4, 64, 64}, {3, 32, 0}, {11, 17, 33}, {64, 64, 64}, {7, 1, 5}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int a = 0; a < 2; a++) {
            ro_activation_t actv = a ? RO_ACT_RELU : RO_ACT_TANH;
            /* Both kernels: ours, and OpenBLAS's sgemm (--gemm openblas). */
            for (int g = 0; g < 2; g++) {
                ro_gemm_t gemm = g ? RO_GEMM_BLAS : RO_GEMM_EXACT;
                check_forward(cfg[c][0], cfg[c][1], cfg[c][2], actv, &disc, gemm);
                check_forward(cfg[c][0], cfg[c][1], cfg[c][2], actv, &box, gemm);
            }
        }
}

/* check_batch_independence evaluates rows alone, then inside a batch at
 * other positions, and wants the same bits for outputs and actions. */
static void check_batch_independence(const ro_space_t *act, ro_activation_t actv)
{
    ro_space_t obs = obs_box(5);
    ro_policy_spec_t spec = mlp_spec(64, 64, actv, 42);
    ro_policy_t *p = new_policy(&spec, &obs, act);
    const int disc = act->kind == RO_SPACE_DISCRETE;
    const uint32_t ad = ro__policy_act_dim(p);
    const uint32_t nout = disc ? act->n : ad;
    const uint32_t N = 37, B = 100;
    float rows[100 * 5];
    fill_inputs(rows, (size_t)B * 5, 5);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, B), 0);

    /* Alone: outputs, and the action from each row's own stream. */
    float alone_out[100][8], alone_af[100][8];
    int32_t alone_ai[100];
    for (uint32_t r = 0; r < B; r++) {
        memcpy(ro__policy_ws_input(ws), rows + r * 5, 5 * sizeof(float));
        ro__policy_forward(p, ws, 1, alone_out[r], NULL);
        ro_rng_t rng, *rp = &rng;
        ro__rng_init(&rng, ro__seed_mix(9, r, RO_STREAM_ACTION));
        ro__policy_act(p, ws, 1, &rp, &alone_ai[r], alone_af[r], NULL, NULL);
    }

    /* In batches of 37 and of 100, rows rotated so each sits elsewhere. */
    const uint32_t sizes[2] = {N, B};
    for (int s = 0; s < 2; s++)
        for (uint32_t shift = 0; shift < sizes[s]; shift += 13) {
            const uint32_t n = sizes[s];
            float out[100 * 8], af[100 * 8];
            int32_t ai[100];
            ro_rng_t rng[100], *rp[100];
            uint32_t src[100];
            for (uint32_t i = 0; i < n; i++) {
                src[i] = (i + shift) % B;
                memcpy(ro__policy_ws_input(ws) + i * 5, rows + src[i] * 5, 5 * sizeof(float));
                ro__rng_init(&rng[i], ro__seed_mix(9, src[i], RO_STREAM_ACTION));
                rp[i] = &rng[i];
            }
            ro__policy_forward(p, ws, n, out, NULL);
            ro__policy_act(p, ws, n, rp, ai, af, NULL, NULL);
            for (uint32_t i = 0; i < n; i++) {
                assert_memory_equal(out + i * nout, alone_out[src[i]], nout * sizeof(float));
                if (disc)
                    assert_int_equal(ai[i], alone_ai[src[i]]);
                else
                    assert_memory_equal(af + i * ad, alone_af[src[i]], ad * sizeof(float));
            }
        }
    ro__policy_ws_free(ws);
    ro__policy_free(p);
}

static void test_batch_independence(void **state)
{
    (void)state;
    static const float lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
    ro_space_t disc = act_discrete(6), box = act_box(3, lo, hi);
    check_batch_independence(&disc, RO_ACT_TANH);
    check_batch_independence(&box, RO_ACT_TANH);
    check_batch_independence(&box, RO_ACT_RELU);
}

/* What a stream lane sends beside its actions (ro_act_stats_t): each
 * action's log-probability under the head that chose it, and a box head's
 * means; asking for them changes no action. 70 rows: two blocks. */
static void check_act_stats(const ro_space_t *act)
{
    ro_space_t obs = obs_box(5);
    ro_policy_spec_t spec = mlp_spec(16, 16, RO_ACT_TANH, 3);
    ro_policy_t *p = new_policy(&spec, &obs, act);
    const bool disc = act->kind == RO_SPACE_DISCRETE;
    const uint32_t ad = ro__policy_act_dim(p), nout = disc ? act->n : ad, n = 70;
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, n), 0);
    fill_inputs(ro__policy_ws_input(ws), (size_t)n * 5, 5);
    float out[70 * 4], af[2][70 * 4], logp[70], mean[70 * 4];
    int32_t ai[2][70];
    ro_rng_t rng[2][70], *rp[2][70];
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < n; i++) {
            ro__rng_init(&rng[k][i], ro__seed_mix(5, i, RO_STREAM_ACTION));
            rp[k][i] = &rng[k][i];
        }
    ro__policy_forward(p, ws, n, out, NULL);
    ro__policy_act(p, ws, n, rp[0], ai[0], af[0], NULL, NULL);
    ro_act_stats_t st = {.logp = logp, .mean = mean};
    ro__policy_act(p, ws, n, rp[1], ai[1], af[1], &st, NULL);
    const float *log_std = ro__policy_log_std(p);
    assert_true(disc == (log_std == NULL));
    for (uint32_t i = 0; i < n; i++) {
        const float *z = out + (size_t)i * nout;
        double want = 0.0;
        if (disc) {
            assert_int_equal(ai[0][i], ai[1][i]);
            double m = z[0], total = 0.0;
            for (uint32_t j = 1; j < nout; j++)
                m = z[j] > m ? z[j] : m;
            for (uint32_t j = 0; j < nout; j++)
                total += exp((double)z[j] - m);
            want = (double)z[ai[1][i]] - m - log(total);
        } else {
            assert_memory_equal(af[0] + i * ad, af[1] + i * ad, ad * sizeof(float));
            assert_memory_equal(mean + i * ad, z, ad * sizeof(float));
            for (uint32_t j = 0; j < ad; j++) {
                double sd = exp((double)log_std[j]), u = (af[1][i * ad + j] - z[j]) / sd;
                want += -0.5 * u * u - (double)log_std[j] - 0.5 * log(2.0 * M_PI);
            }
        }
        if (fabs((double)logp[i] - want) > 1e-4)
            fail_msg("row %u: logp %.7f, want %.7f", i, (double)logp[i], want);
    }
    ro__policy_ws_free(ws);
    ro__policy_free(p);
}

static void test_act_stats(void **state)
{
    (void)state;
    static const float lo[2] = {-0.5f, -0.5f}, hi[2] = {0.5f, 0.5f};
    ro_space_t disc = act_discrete(4), box = act_box(2, lo, hi);
    check_act_stats(&disc);
    check_act_stats(&box); /* clipped actions: the unclipped density at the clipped point */
    /* A random policy: uniform log-probabilities. */
    ro_space_t obs = obs_box(5);
    ro_policy_spec_t r = {.kind = RO_POLICY_RANDOM};
    for (int k = 0; k < 2; k++) {
        ro_policy_t *p = new_policy(&r, &obs, k ? &box : &disc);
        ro_policy_ws_t *ws;
        assert_int_equal(ro__policy_ws_new(&ws, p, 3), 0);
        ro_rng_t rng[3], *rp[3];
        for (int i = 0; i < 3; i++) {
            ro__rng_init(&rng[i], (uint64_t)i + 1);
            rp[i] = &rng[i];
        }
        int32_t ai[3];
        float af[6], logp[3];
        ro_act_stats_t st = {.logp = logp};
        ro__policy_act(p, ws, 3, rp, ai, af, &st, NULL);
        for (int i = 0; i < 3; i++)
            assert_float_equal(logp[i], k ? -logf(1.0f) /* area 1 x 1 */ : -logf(4.0f), 1e-6);
        ro__policy_ws_free(ws);
        ro__policy_free(p);
    }
}

static void test_seeded_init(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(4), act = act_discrete(3);
    ro_policy_spec_t s1 = mlp_spec(64, 64, RO_ACT_TANH, 1);
    ro_policy_spec_t s2 = mlp_spec(64, 64, RO_ACT_TANH, 2);
    ro_policy_t *a = new_policy(&s1, &obs, &act);
    ro_policy_t *b = new_policy(&s1, &obs, &act);
    ro_policy_t *c = new_policy(&s2, &obs, &act);
    ro_policy_ws_t *wa, *wb, *wc;
    assert_int_equal(ro__policy_ws_new(&wa, a, 16), 0);
    assert_int_equal(ro__policy_ws_new(&wb, b, 16), 0);
    assert_int_equal(ro__policy_ws_new(&wc, c, 16), 0);
    fill_inputs(ro__policy_ws_input(wa), 64, 3);
    memcpy(ro__policy_ws_input(wb), ro__policy_ws_input(wa), 64 * sizeof(float));
    memcpy(ro__policy_ws_input(wc), ro__policy_ws_input(wa), 64 * sizeof(float));
    float oa[48], ob[48], oc[48];
    ro__policy_forward(a, wa, 16, oa, NULL);
    ro__policy_forward(b, wb, 16, ob, NULL);
    ro__policy_forward(c, wc, 16, oc, NULL);
    assert_memory_equal(oa, ob, sizeof oa);
    assert_memory_not_equal(oa, oc, sizeof oa);
    /* The head starts small: logits near 0, so actions near uniform. */
    for (int i = 0; i < 48; i++)
        assert_true(fabsf(oa[i]) < 0.05f);

    ro_policy_params_t pa, pc;
    policy_weights(a, &obs, &act, &pa);
    policy_weights(c, &obs, &act, &pc);
    assert_memory_not_equal(pa.layers[0].weight, pc.layers[0].weight, 64 * 4 * sizeof(float));
    for (uint32_t l = 0; l < pa.nlayers; l++) {
        const ro_policy_layer_t *L = &pa.layers[l];
        float bound = 1.0f / sqrtf((float)L->in) * (l + 1 == pa.nlayers ? 0.01f : 1.0f);
        float mx = 0;
        for (size_t i = 0; i < (size_t)L->in * L->out; i++) {
            assert_true(fabsf(L->weight[i]) <= bound);
            mx = fabsf(L->weight[i]) > mx ? fabsf(L->weight[i]) : mx;
        }
        assert_true(mx > 0.9f * bound); /* the whole range is used */
    }
    for (uint32_t j = 0; j < 3; j++)
        assert_true(pa.layers[2].bias[j] == 0.0f);
    ro__policy_params_free(&pa);
    ro__policy_params_free(&pc);

    char buf[64];
    ro__policy_describe(a, buf, sizeof buf);
    assert_string_equal(buf, "mlp(64,64,tanh)");
    ro__policy_describe(a, buf, 6); /* truncates, stays terminated */
    assert_string_equal(buf, "mlp(6");
    assert_int_equal(ro__policy_obs_dim(a), 4);
    assert_int_equal(ro__policy_act_dim(a), 1);
    ro__policy_ws_free(wa);
    ro__policy_ws_free(wb);
    ro__policy_ws_free(wc);
    ro__policy_free(a);
    ro__policy_free(b);
    ro__policy_free(c);
}

static void test_box_init_log_std(void **state)
{
    (void)state;
    static const float lo[2] = {-2, -2}, hi[2] = {2, 2};
    ro_space_t obs = obs_box(3), act = act_box(2, lo, hi);
    ro_policy_spec_t s = mlp_spec(16, 0, RO_ACT_RELU, 5);
    ro_policy_t *p = new_policy(&s, &obs, &act);
    ro_policy_params_t pp;
    policy_weights(p, &obs, &act, &pp);
    assert_true(pp.log_std[0] == 0.0f && pp.log_std[1] == 0.0f);
    assert_int_equal(pp.nlayers, 2);
    ro__policy_params_free(&pp);
    char buf[64];
    ro__policy_describe(p, buf, sizeof buf);
    assert_string_equal(buf, "mlp(16,relu)");
    ro__policy_free(p);
}

static void expect_error(const ro_policy_spec_t *spec, const ro_space_t *obs, const ro_space_t *act,
                         int code, const char *needle)
{
    ro_policy_t *p = (ro_policy_t *)1;
    char err[ERRLEN] = "";
    int rc = ro__policy_new(&p, spec, obs, act, err, sizeof err);
    assert_int_equal(rc, code);
    assert_null(p);
    if (!strstr(err, needle))
        fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
}

static void test_spec_validation(void **state)
{
    (void)state;
    static const float lo[2] = {-1, 1}, hi[2] = {1, -1};
    ro_space_t obs = obs_box(4), act = act_discrete(2), bad_box = act_box(2, lo, hi);
    ro_space_t disc_obs = act_discrete(4), weird = {.kind = 9};
    ro_policy_spec_t s = mlp_spec(64, 64, RO_ACT_TANH, 1);
    s.nhidden = 0;
    expect_error(&s, &obs, &act, RO_EINVAL, "0 hidden layers");
    s.nhidden = RO_POLICY_MAX_HIDDEN + 1;
    expect_error(&s, &obs, &act, RO_EINVAL, "9 hidden layers");
    s = mlp_spec(64, 0, RO_ACT_TANH, 1);
    s.hidden[0] = 0;
    expect_error(&s, &obs, &act, RO_EINVAL, "hidden layer 0 is 0 wide");
    s.hidden[0] = 65537;
    expect_error(&s, &obs, &act, RO_EINVAL, "hidden layer 0 is 65537 wide");
    s = mlp_spec(64, 0, 7, 1);
    expect_error(&s, &obs, &act, RO_EINVAL, "activation");
    s = mlp_spec(64, 0, RO_ACT_TANH, 1);
    expect_error(&s, &disc_obs, &act, RO_EINVAL, "observation space must be a box");
    expect_error(&s, &obs, &weird, RO_EINVAL, "discrete or a box");
    expect_error(&s, &obs, &bad_box, RO_EINVAL, "low[1]");
    ro_space_t zero = act_discrete(0);
    expect_error(&s, &obs, &zero, RO_EINVAL, "0 discrete actions");
    s.kind = 0;
    expect_error(&s, &obs, &act, RO_EINVAL, "unknown kind");
    s = mlp_spec(64, 0, RO_ACT_TANH, 1);
    s.params_path = tmp_path("does-not-exist.pb");
    expect_error(&s, &obs, &act, RO_ENOENT, "does-not-exist.pb");

    /* A hidden layer of the largest width is accepted. */
    s = mlp_spec(RO_POLICY_MAX_WIDTH, 0, RO_ACT_TANH, 1);
    ro_policy_t *p = new_policy(&s, &obs, &act);
    ro__policy_free(p);

    /* A random policy has nothing to save. */
    ro_policy_spec_t r = {.kind = RO_POLICY_RANDOM};
    p = new_policy(&r, &obs, &act);
    char err[ERRLEN];
    assert_int_equal(ro__policy_save(p, tmp_path("x.pb"), err, sizeof err), RO_EINVAL);
    ro__policy_free(p);
}

static void test_loaded_describe(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(4), act = act_discrete(2);
    ro_policy_spec_t s = mlp_spec(32, 16, RO_ACT_RELU, 3);
    ro_policy_t *p = new_policy(&s, &obs, &act);
    char err[ERRLEN];
    const char *path = tmp_path("d.pb");
    assert_int_equal(ro__policy_save(p, path, err, sizeof err), 0);
    ro_policy_spec_t ls = {.kind = RO_POLICY_MLP,
                           .params_path = path,
                           .activation = RO_ACT_TANH}; /* taken from the file instead */
    ro_policy_t *q = new_policy(&ls, &obs, &act);
    char buf[256], want[256];
    ro__policy_describe(q, buf, sizeof buf);
    snprintf(want, sizeof want, "mlp(file:%s,32,16,relu)", path);
    assert_string_equal(buf, want);
    ro__policy_free(p);
    ro__policy_free(q);
}

/* Several threads share one policy, each with its own workspace. */
typedef struct thread_arg {
    const ro_policy_t *p;
    const float *in;
    float out[64 * 5];
} thread_arg_t;

static void *thread_main(void *arg)
{
    thread_arg_t *t = arg;
    ro_policy_ws_t *ws;
    if (ro__policy_ws_new(&ws, t->p, 64) != 0)
        return NULL;
    for (int it = 0; it < 200; it++) {
        memcpy(ro__policy_ws_input(ws), t->in, 64 * 4 * sizeof(float));
        ro__policy_forward(t->p, ws, 64, t->out, NULL);
    }
    ro__policy_ws_free(ws);
    return t;
}

static void test_threads_share_policy(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(4), act = act_discrete(5);
    ro_policy_spec_t s = mlp_spec(64, 64, RO_ACT_TANH, 11);
    ro_policy_t *p = new_policy(&s, &obs, &act);
    float in[64 * 4], want[64 * 5];
    fill_inputs(in, 64 * 4, 8);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, 64), 0);
    memcpy(ro__policy_ws_input(ws), in, sizeof in);
    ro__policy_forward(p, ws, 64, want, NULL);
    ro__policy_ws_free(ws);
    pthread_t th[4];
    thread_arg_t args[4];
    for (int i = 0; i < 4; i++) {
        args[i].p = p;
        args[i].in = in;
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        assert_int_equal(pthread_join(th[i], &r), 0);
        assert_non_null(r);
        assert_memory_equal(args[i].out, want, sizeof want);
    }
    ro__policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_matches_reference),
        cmocka_unit_test(test_batch_independence),
        cmocka_unit_test(test_act_stats),
        cmocka_unit_test(test_seeded_init),
        cmocka_unit_test(test_box_init_log_std),
        cmocka_unit_test(test_spec_validation),
        cmocka_unit_test(test_loaded_describe),
        cmocka_unit_test(test_threads_share_policy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
