/*
 * Tests of the policy's kernels (src/policy/kernels.c and the kernel
 * bodies): every instruction set this CPU runs gives the same bits as the
 * portable C path for tanh, relu, the softmax exp, the dense layer and both
 * samplers; tanh's error in ulp; the special values; and the dense layer
 * against a double reference, whatever lane a sample sits in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/kernels.h"
#include "runtime/rng.h"

/* The largest tanh error over all floats, measured by bench/tanh_error
 * (docs/policy.md): 4.967 ulp. The tests hold every path to 5. */
#define TANH_MAX_ULP 5.0

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* paths fills out with the tables this CPU runs, the portable one first. */
static int paths(const ro_kernels_t *out[3])
{
    int n = 0;
    const ro_kernel_path_t all[3] = {RO_KERNELS_SCALAR, RO_KERNELS_AVX2, RO_KERNELS_AVX512};
    for (int i = 0; i < 3; i++) {
        const ro_kernels_t *k = ro__kernels(all[i]);
        if (k)
            out[n++] = k;
        else
            print_message("kernels: this CPU does not run the %s path: not tested here\n",
                          ro__kernels_path_name(all[i]));
    }
    return n;
}

/* ulp_error is |got - want| in units of the float spacing at want. */
static double ulp_error(float got, double want)
{
    const double a = fabs(want);
    if (a < 0x1p-126)
        return fabs((double)got - want) / 0x1p-149;
    int e;
    frexp(a, &e); /* a = m 2^e, m in [0.5, 1): floats there are 2^(e - 24) apart */
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

static void test_dispatch(void **state)
{
    (void)state;
    const ro_kernels_t *best = ro__kernels(RO_KERNELS_AUTO);
    assert_non_null(best);
    assert_non_null(ro__kernels(RO_KERNELS_SCALAR));
    assert_ptr_equal(ro__kernels(best->path), best);
    /* Nothing better than the best runs. */
    for (int p = best->path + 1; p <= RO_KERNELS_AVX512; p++)
        assert_null(ro__kernels((ro_kernel_path_t)p));
    assert_null(ro__kernels((ro_kernel_path_t)7));
    assert_string_equal(ro__kernels_path_name(RO_KERNELS_AVX512), "avx512");
    print_message("kernels: best path on this CPU: %s (%u lanes)\n", best->name, best->lanes);
}

#define CHUNK 4096

/* sweep_tanh runs every path over in[0..n), checks the bits against the
 * first path, the error against tanh in double, the sign and oddness, and
 * returns the largest error. */
static double sweep_tanh(const ro_kernels_t *const *k, int np, const float *in, size_t n)
{
    static float out[3][CHUNK], neg[CHUNK];
    double worst = 0.0;
    for (int p = 0; p < np; p++) {
        memcpy(out[p], in, n * sizeof(float));
        k[p]->act(out[p], n, RO_ACT_TANH);
    }
    for (size_t i = 0; i < n; i++)
        neg[i] = -in[i];
    k[np - 1]->act(neg, n, RO_ACT_TANH);
    for (size_t i = 0; i < n; i++) {
        const float x = in[i], y = out[0][i];
        for (int p = 1; p < np; p++)
            if (to_bits(out[p][i]) != to_bits(y) && !(isnan(y) && isnan(out[p][i])))
                fail_msg("tanh(%a): %s gives %a, %s %a", (double)x, k[p]->name, (double)out[p][i],
                         k[0]->name, (double)y);
        if (isnan(x)) {
            assert_true(isnan(y));
            continue;
        }
        const double e = ulp_error(y, tanh((double)x));
        if (e > worst)
            worst = e;
        if (e > TANH_MAX_ULP || !(fabsf(y) <= 1.0f))
            fail_msg("tanh(%a) = %a: %.2f ulp from %a", (double)x, (double)y, e, tanh((double)x));
        assert_int_equal(signbit(y) != 0, signbit(x) != 0);
        assert_int_equal(to_bits(neg[i]), to_bits(y) ^ 0x80000000u);
    }
    return worst;
}

static void test_tanh_error_and_paths(void **state)
{
    (void)state;
    const ro_kernels_t *k[3];
    const int np = paths(k);
    static float in[CHUNK];
    double worst = 0.0;
    size_t n = 0;
    /* Every 61st bit pattern from +0 to +inf (35 million floats: all
     * magnitudes, subnormals to FLT_MAX); then every float of [5.9, 7.1],
     * where the largest errors are; negatives through oddness. */
    for (uint64_t u = 0; u <= 0x7f800000u; u += 61) {
        in[n++] = from_bits((uint32_t)u);
        if (n == CHUNK) {
            worst = fmax(worst, sweep_tanh(k, np, in, n));
            n = 0;
        }
    }
    for (uint32_t u = to_bits(5.9f); u <= to_bits(7.1f); u++) {
        in[n++] = from_bits(u);
        if (n == CHUNK) {
            worst = fmax(worst, sweep_tanh(k, np, in, n));
            n = 0;
        }
    }
    worst = fmax(worst, sweep_tanh(k, np, in, n));
    print_message("tanh: largest error over the sweep %.3f ulp, %d paths bit-equal\n", worst, np);
}

static void test_tanh_special(void **state)
{
    (void)state;
    const ro_kernels_t *k[3];
    const int np = paths(k);
    for (int p = 0; p < np; p++) {
        float x[] = {0.0f,     -0.0f,   INFINITY, -INFINITY, FLT_MAX, -FLT_MAX,
                     1e-45f,   -1e-45f, 1e-20f,   FLT_MIN,   9.0f,    -9.0f,
                     7.99399f, 8.1f,    20.0f,    -88.0f,    0x1p-12f};
        k[p]->act(x, sizeof x / sizeof x[0], RO_ACT_TANH);
        assert_int_equal(to_bits(x[0]), to_bits(0.0f));
        assert_int_equal(to_bits(x[1]), to_bits(-0.0f));
        assert_true(x[2] == 1.0f && x[3] == -1.0f && x[4] == 1.0f && x[5] == -1.0f);
        /* Where tanh(x) ~ x, x itself. */
        assert_true(x[6] == 1e-45f && x[7] == -1e-45f && x[8] == 1e-20f && x[9] == FLT_MIN);
        assert_true(x[10] == 1.0f && x[11] == -1.0f && x[13] == 1.0f && x[14] == 1.0f);
        assert_true(x[15] == -1.0f);
        assert_true(x[12] < 1.0f); /* just under the clamp */
        /* NaNs of any sign and payload stay NaN. */
        const uint32_t nans[4] = {0x7fc12345u, 0xffc00001u, 0x7f800001u, 0xffffffffu};
        for (int i = 0; i < 4; i++) {
            float q = from_bits(nans[i]);
            k[p]->act(&q, 1, RO_ACT_TANH);
            assert_true(isnan(q));
        }
    }
}

static void test_act_lengths_and_offsets(void **state)
{
    (void)state;
    /* Whole vectors, the padded last one and unaligned starts give the
     * same bits as one element at a time, on every path. */
    const ro_kernels_t *k[3];
    const int np = paths(k);
    float base[80], one[80];
    ro_rng_t rng;
    ro__rng_init(&rng, 7);
    for (int i = 0; i < 80; i++)
        base[i] = (float)ro__rng_uniform(&rng, -6.0, 6.0);
    for (int p = 0; p < np; p++)
        for (int a = RO_ACT_TANH; a <= RO_ACT_RELU; a++) {
            for (int i = 0; i < 80; i++) {
                one[i] = base[i];
                k[0]->act(&one[i], 1, (ro_activation_t)a);
            }
            for (size_t off = 0; off < 17; off++)
                for (size_t len = 0; len + off <= 80; len += 7) {
                    float buf[80];
                    memcpy(buf, base, sizeof buf);
                    k[p]->act(buf + off, len, (ro_activation_t)a);
                    for (size_t i = 0; i < 80; i++) {
                        float want = i >= off && i < off + len ? one[i] : base[i];
                        assert_int_equal(to_bits(buf[i]), to_bits(want));
                    }
                }
        }
}

static void test_relu(void **state)
{
    (void)state;
    const ro_kernels_t *k[3];
    const int np = paths(k);
    const float v[] = {1.5f,    -1.5f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN,   1e-45f, -1e-45f,
                       FLT_MAX, -3.0f, 2.0f, 7.0f,  -7.0f,    0.5f,      -0.5f, 42.0f};
    const size_t n = sizeof v / sizeof v[0];
    for (int p = 0; p < np; p++) {
        float x[sizeof v / sizeof v[0]];
        memcpy(x, v, sizeof v);
        k[p]->act(x, n, RO_ACT_RELU);
        for (size_t i = 0; i < n; i++) {
            if (isnan(v[i]))
                assert_true(isnan(x[i]));
            else if (v[i] > 0.0f)
                assert_true(x[i] == v[i]);
            else /* x < 0 ? 0 : x: -0 stays -0 */
                assert_int_equal(to_bits(x[i]), to_bits(v[i] == 0.0f ? v[i] : 0.0f));
        }
        k[p]->act(x, 0, RO_ACT_RELU); /* nothing to do, nothing touched */
    }
}

static void test_exp_weight(void **state)
{
    (void)state;
    const ro_kernels_t *k[3];
    const int np = paths(k);
    static float in[CHUNK], out[3][CHUNK];
    double worst = 0.0;
    /* Every 7th float of [-87, 0]; the edges; NaN. */
    size_t n = 0;
    for (uint32_t u = to_bits(-0.0f); u <= to_bits(-87.0f) + 8; u += 7) {
        in[n++] = from_bits(u);
        if (n < CHUNK && u + 7 <= to_bits(-87.0f) + 8)
            continue;
        for (int p = 0; p < np; p++) {
            memcpy(out[p], in, n * sizeof(float));
            k[p]->exp_weight(out[p], n);
        }
        for (size_t i = 0; i < n; i++) {
            for (int p = 1; p < np; p++)
                assert_int_equal(to_bits(out[p][i]), to_bits(out[0][i]));
            if (in[i] <= -87.0f) {
                assert_true(out[0][i] == 0.0f);
                continue;
            }
            worst = fmax(worst, ulp_error(out[0][i], exp((double)in[i])));
        }
        n = 0;
    }
    assert_true(worst <= 2.0);
    float special[] = {0.0f, -0.0f, NAN, -INFINITY, -1e30f};
    for (int p = 0; p < np; p++) {
        float s[5];
        memcpy(s, special, sizeof s);
        k[p]->exp_weight(s, 5);
        assert_true(s[0] == 1.0f && s[1] == 1.0f); /* the largest weight is exactly 1 */
        assert_true(s[2] == 0.0f && s[3] == 0.0f && s[4] == 0.0f);
    }
    print_message("softmax exp: largest error %.3f ulp\n", worst);
}

/* A dense layer with seeded weights in the kernels' layout. */
typedef struct layer {
    ro_dense_t d;
    float *w; /* [out x in], the reference copy */
    float *mem;
} layer_t;

static void layer_make(layer_t *L, uint32_t in, uint32_t out, uint64_t seed)
{
    uint32_t ldw = (out + RO_DENSE_PAD - 1) / RO_DENSE_PAD * RO_DENSE_PAD;
    assert_int_equal(posix_memalign((void **)&L->mem, 64, ((size_t)in + 1) * ldw * 4), 0);
    memset(L->mem, 0, ((size_t)in + 1) * ldw * 4);
    L->w = malloc((size_t)in * out * 4);
    ro_rng_t rng;
    ro__rng_init(&rng, seed);
    float *wt = L->mem, *b = L->mem + (size_t)in * ldw;
    for (uint32_t j = 0; j < out; j++) {
        for (uint32_t k = 0; k < in; k++) {
            float w = (float)ro__rng_uniform(&rng, -1.0, 1.0);
            L->w[(size_t)j * in + k] = w;
            wt[(size_t)k * ldw + j] = w;
        }
        b[j] = (float)ro__rng_uniform(&rng, -1.0, 1.0);
    }
    L->d = (ro_dense_t){.in = in, .out = out, .ldw = ldw, .wt = wt, .bias = b};
}

static void layer_free(layer_t *L)
{
    free(L->mem);
    free(L->w);
}

static float *block(size_t rows)
{
    float *b;
    assert_int_equal(posix_memalign((void **)&b, 64, rows * RO_BLOCK * sizeof(float)), 0);
    return b;
}

/* check_dense runs one layer on every path and every act over blocks of n
 * samples: bits equal to the portable path, sums close to a double
 * reference, and sample s alone at lane 0 gives the bits it gets at lane s. */
static void check_dense(const ro_kernels_t *const *k, int np, uint32_t in, uint32_t out)
{
    layer_t L;
    layer_make(&L, in, out, in * 1000u + out);
    float *x = block(in), *y = block(out), *y0 = block(out), *x1 = block(in), *y1 = block(out);
    ro_rng_t rng;
    ro__rng_init(&rng, 99 + in);
    for (size_t i = 0; i < (size_t)in * RO_BLOCK; i++)
        x[i] = (float)ro__rng_uniform(&rng, -2.0, 2.0);
    memset(x1, 0, (size_t)in * RO_BLOCK * sizeof(float));
    const uint32_t ns[] = {1, 2, 5, 8, 15, 16, 17, 33, 48, 63, 64};
    for (int a = 0; a <= RO_ACT_RELU; a++) {
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            const uint32_t n = ns[t];
            k[0]->dense(&L.d, x, y0, n, (ro_activation_t)a);
            for (int p = 1; p < np; p++) {
                k[p]->dense(&L.d, x, y, n, (ro_activation_t)a);
                for (uint32_t j = 0; j < out; j++)
                    for (uint32_t s = 0; s < n; s++)
                        if (to_bits(y[(size_t)j * RO_BLOCK + s]) !=
                            to_bits(y0[(size_t)j * RO_BLOCK + s]))
                            fail_msg("dense %ux%u act %d n %u: %s differs at out %u sample %u", in,
                                     out, a, n, k[p]->name, j, s);
            }
        }
        for (uint32_t s = 0; s < RO_BLOCK; s++) {
            for (uint32_t j = 0; j < out; j++) {
                double ref = L.d.bias[j], mag = fabs(ref);
                for (uint32_t kk = 0; kk < in; kk++) {
                    double tv = (double)x[(size_t)kk * RO_BLOCK + s] * L.w[(size_t)j * in + kk];
                    ref += tv;
                    mag += fabs(tv);
                }
                ref = a == RO_ACT_TANH ? tanh(ref) : a == RO_ACT_RELU ? (ref > 0 ? ref : 0) : ref;
                assert_true(fabs(y0[(size_t)j * RO_BLOCK + s] - ref) <= 1e-6 * (mag + 1));
            }
            /* The same sample alone, at lane 0, on the best path. */
            for (uint32_t kk = 0; kk < in; kk++)
                x1[(size_t)kk * RO_BLOCK] = x[(size_t)kk * RO_BLOCK + s];
            k[np - 1]->dense(&L.d, x1, y1, 1, (ro_activation_t)a);
            for (uint32_t j = 0; j < out; j++)
                assert_int_equal(to_bits(y1[(size_t)j * RO_BLOCK]),
                                 to_bits(y0[(size_t)j * RO_BLOCK + s]));
        }
    }
    free(x);
    free(y);
    free(y0);
    free(x1);
    free(y1);
    layer_free(&L);
}

static void test_dense(void **state)
{
    (void)state;
    const ro_kernels_t *k[3];
    const int np = paths(k);
    const uint32_t shapes[][2] = {{1, 1},  {3, 2},   {4, 64},  {64, 64}, {11, 17}, {64, 3},
                                  {5, 24}, {33, 40}, {100, 9}, {7, 13},  {2, 6}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_dense(k, np, shapes[s][0], shapes[s][1]);
}

static void test_categorical(void **state)
{
    (void)state;
    const ro_kernels_t *k[3];
    const int np = paths(k);
    const uint32_t nout = 5;
    float *z0 = block(nout), *z = block(nout);
    _Alignas(64) double u[RO_BLOCK];
    int32_t a0[RO_BLOCK], a[RO_BLOCK];
    ro_rng_t rng;
    ro__rng_init(&rng, 5);
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < (size_t)nout * RO_BLOCK; i++)
            z0[i] = (float)ro__rng_uniform(&rng, -4.0, 4.0) * (float)(round % 5);
        for (int s = 0; s < RO_BLOCK; s++)
            u[s] = ro__rng_double(&rng);
        if (round == 1) { /* the edges of u: the first and the last action */
            u[0] = 0.0;
            u[1] = 1.0 - 0x1p-53;
            z0[RO_BLOCK + 2] = NAN; /* sample 2's action 1: it gets no weight */
        }
        for (int p = 0; p < np; p++) {
            memcpy(z, z0, (size_t)nout * RO_BLOCK * sizeof(float));
            k[p]->categorical(z, nout, RO_BLOCK, u, p ? a : a0);
            if (p)
                assert_memory_equal(a, a0, sizeof a);
        }
        for (int s = 0; s < RO_BLOCK; s++)
            assert_in_range(a0[s], 0, nout - 1);
        if (round == 1) {
            assert_int_equal(a0[0], 0);
            assert_int_equal(a0[1], nout - 1);
            assert_int_not_equal(a0[2], 1);
        }
    }
    /* Every logit NaN: action 0. */
    for (size_t i = 0; i < (size_t)nout * RO_BLOCK; i++)
        z0[i] = NAN;
    for (int p = 0; p < np; p++) {
        memcpy(z, z0, (size_t)nout * RO_BLOCK * sizeof(float));
        k[p]->categorical(z, nout, 3, u, a);
        assert_true(a[0] == 0 && a[1] == 0 && a[2] == 0);
    }
    free(z0);
    free(z);
}

static void test_gaussian(void **state)
{
    (void)state;
    const ro_kernels_t *k[3];
    const int np = paths(k);
    float *mean = block(1), *o0 = block(1), *o = block(1);
    _Alignas(64) double u1[RO_BLOCK];
    _Alignas(64) double u2[RO_BLOCK];
    ro_rng_t rng;
    ro__rng_init(&rng, 6);
    long differ = 0, total = 0;
    for (int round = 0; round < 2000; round++) {
        for (int s = 0; s < RO_BLOCK; s++) {
            mean[s] = (float)ro__rng_uniform(&rng, -1.0, 1.0);
            u1[s] = 1.0 - ro__rng_double(&rng);
            u2[s] = ro__rng_double(&rng);
        }
        const float lo = round % 2 ? -1.5f : -INFINITY, hi = round % 2 ? 1.5f : INFINITY;
        if (round == 0) {
            u1[0] = 1.0; /* radius 0: the mean itself */
            u1[1] = 0x1p-53;
            mean[2] = NAN;
        }
        for (int p = 0; p < np; p++) {
            k[p]->gaussian(mean, RO_BLOCK, u1, u2, 0.5f, lo, hi, p ? o : o0);
            if (p)
                for (int s = 0; s < RO_BLOCK; s++)
                    assert_true(to_bits(o[s]) == to_bits(o0[s]) || (isnan(o[s]) && isnan(o0[s])));
        }
        for (int s = 0; s < RO_BLOCK; s++) {
            if (isnan(mean[s])) {
                assert_true(isnan(o0[s]));
                continue;
            }
            /* Against libm's Box-Muller: the same float but for rare
             * last-bit differences of the double maths. */
            double ref = (double)mean[s] + 0.5 * (sqrt(-2.0 * log(u1[s])) * cos(2 * M_PI * u2[s]));
            float want = (float)(ref < lo ? lo : ref > hi ? hi : ref);
            total++;
            if (to_bits(want) != to_bits(o0[s])) {
                differ++;
                assert_true(fabs((double)want - o0[s]) <= 1e-6 * (1 + fabs(want)));
            }
            assert_true(o0[s] >= lo && o0[s] <= hi);
        }
        if (round == 0)
            assert_true(o0[0] == mean[0]);
    }
    print_message("gaussian: %ld of %ld draws differ from libm's Box-Muller in the last bit\n",
                  differ, total);
    assert_true(differ * 1000 < total);
    free(mean);
    free(o0);
    free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),     cmocka_unit_test(test_tanh_error_and_paths),
        cmocka_unit_test(test_tanh_special), cmocka_unit_test(test_act_lengths_and_offsets),
        cmocka_unit_test(test_relu),         cmocka_unit_test(test_exp_weight),
        cmocka_unit_test(test_dense),        cmocka_unit_test(test_categorical),
        cmocka_unit_test(test_gaussian),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
