/* Tests of the vectorized kernels: tanh, relu and the dense layer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/activation.h"
#include "runtime/rng.h"

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

#define CHUNK 4096

/* check_tanh_chunk runs ro__act_tanh over in[0..n) and checks each result
 * against tanhf (absolute error), its sign, and oddness; returns the largest
 * error seen. */
static double check_tanh_chunk(const float *in, size_t n)
{
    static float out[CHUNK], neg[CHUNK];
    memcpy(out, in, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        neg[i] = -in[i];
    ro__act_tanh(out, n);
    ro__act_tanh(neg, n);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float x = in[i], y = out[i];
        if (isnan(x)) {
            assert_true(isnan(y));
            continue;
        }
        double e = fabs((double)y - (double)tanhf(x));
        if (e > worst)
            worst = e;
        if (e > 2e-6)
            fail_msg("tanh(%a) = %a, tanhf gives %a", (double)x, (double)y, (double)tanhf(x));
        /* Exact sign (zeros included) and exact odd symmetry. */
        assert_int_equal(signbit(y) != 0, signbit(x) != 0);
        assert_int_equal(to_bits(neg[i]), to_bits(y) ^ 0x80000000u);
    }
    return worst;
}

static void test_tanh_bit_sweep(void **state)
{
    (void)state;
    /* Every 61st bit pattern from +0 to +inf (35 million floats: all
     * magnitudes, subnormals to FLT_MAX); negatives through oddness. */
    static float in[CHUNK];
    double worst = 0.0;
    size_t n = 0;
    for (uint64_t u = 0; u <= 0x7f800000u; u += 61) {
        in[n++] = from_bits((uint32_t)u);
        if (n == CHUNK) {
            double e = check_tanh_chunk(in, n);
            worst = e > worst ? e : worst;
            n = 0;
        }
    }
    double e = check_tanh_chunk(in, n);
    worst = e > worst ? e : worst;
    print_message("tanh max abs error vs tanhf over the bit sweep: %.3g\n", worst);
}

static void test_tanh_dense_range(void **state)
{
    (void)state;
    /* Every float in [0.25, 4) (where the error peaks), then a uniform
     * sweep of [-12, 12] in steps of 1e-5. */
    static float in[CHUNK];
    size_t n = 0;
    for (uint32_t u = to_bits(0.25f); u < to_bits(4.0f); u++) {
        in[n++] = from_bits(u);
        if (n == CHUNK) {
            check_tanh_chunk(in, n);
            n = 0;
        }
    }
    for (int64_t k = -1200000; k <= 1200000; k++) {
        in[n++] = (float)((double)k * 1e-5);
        if (n == CHUNK) {
            check_tanh_chunk(in, n);
            n = 0;
        }
    }
    check_tanh_chunk(in, n);
}

static void test_tanh_special(void **state)
{
    (void)state;
    float v[] = {0.0f,  -0.0f,  INFINITY, -INFINITY, NAN,     -NAN,   FLT_MAX,  -FLT_MAX,
                 9.0f,  -9.0f,  8.9999f,  1e-20f,    -1e-20f, 1e-45f, -1e-45f,  FLT_MIN,
                 1e-4f, -1e-4f, 20.0f,    -20.0f,    88.0f,   -89.0f, 0x1p-12f, -0x1p-12f};
    const size_t n = sizeof v / sizeof v[0];
    float x[sizeof v / sizeof v[0]];
    memcpy(x, v, sizeof v);
    ro__act_tanh(x, n);
    assert_int_equal(to_bits(x[0]), to_bits(0.0f));
    assert_int_equal(to_bits(x[1]), to_bits(-0.0f));
    assert_true(x[2] == 1.0f && x[3] == -1.0f);
    assert_true(isnan(x[4]) && isnan(x[5]));
    assert_true(x[6] == 1.0f && x[7] == -1.0f);
    /* Where tanh(x) ~ x the result keeps its relative accuracy. */
    assert_true(x[11] == 1e-20f && x[12] == -1e-20f);
    assert_true(x[13] == 1e-45f && x[14] == -1e-45f);
    assert_true(fabsf(x[16] - tanhf(1e-4f)) <= 1e-11f);
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            assert_true(fabs((double)x[i] - tanh((double)v[i])) <= 2e-6);
    /* NaNs of any sign and payload stay NaN. */
    const uint32_t nans[4] = {0x7fc12345u, 0xffc00001u, 0x7f800001u, 0xffffffffu};
    for (int i = 0; i < 4; i++) {
        float q = from_bits(nans[i]);
        ro__act_tanh(&q, 1);
        assert_true(isnan(q));
    }
}

static void test_tanh_lengths_and_offsets(void **state)
{
    (void)state;
    /* The vector body, the scalar remainder and unaligned starts must all
     * give the same bits as one element at a time. */
    float base[80], one[80];
    ro_rng_t rng;
    ro__rng_init(&rng, 7);
    for (int i = 0; i < 80; i++)
        base[i] = (float)ro__rng_uniform(&rng, -6.0, 6.0);
    for (int i = 0; i < 80; i++) {
        one[i] = base[i];
        ro__act_tanh(&one[i], 1);
    }
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len + off <= 80; len += 7) {
            float buf[80];
            memcpy(buf, base, sizeof buf);
            ro__act_tanh(buf + off, len);
            for (size_t i = 0; i < 80; i++) {
                float want = i >= off && i < off + len ? one[i] : base[i];
                assert_int_equal(to_bits(buf[i]), to_bits(want));
            }
        }
}

static void test_relu(void **state)
{
    (void)state;
    float v[] = {1.5f,    -1.5f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN,   1e-45f, -1e-45f,
                 FLT_MAX, -3.0f, 2.0f, 7.0f,  -7.0f,    0.5f,      -0.5f, 42.0f};
    const size_t n = sizeof v / sizeof v[0];
    float x[sizeof v / sizeof v[0]];
    memcpy(x, v, sizeof v);
    ro__act_relu(x, n);
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i]))
            assert_true(isnan(x[i]));
        else if (v[i] > 0.0f)
            assert_true(x[i] == v[i]);
        else
            assert_true(x[i] == 0.0f);
    }
    ro__act_relu(x, 0); /* nothing to do, nothing touched */
}

/* A dense layer with random weights, laid out as ro_dense_t wants. */
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

typedef void dense_fn(const ro_dense_t *, const float *, size_t, uint32_t, float *, size_t);

static void check_dense(dense_fn *fn, uint32_t in, uint32_t out)
{
    layer_t L;
    layer_make(&L, in, out, in * 1000u + out);
    const uint32_t nmax = 50, ldx = in + 3; /* an input stride that is not the width */
    float *x = malloc((size_t)nmax * ldx * 4);
    float *y, *y1;
    assert_int_equal(posix_memalign((void **)&y, 64, (size_t)nmax * L.d.ldw * 4), 0);
    assert_int_equal(posix_memalign((void **)&y1, 64, (size_t)L.d.ldw * 4), 0);
    ro_rng_t rng;
    ro__rng_init(&rng, 99);
    for (size_t i = 0; i < (size_t)nmax * ldx; i++)
        x[i] = (float)ro__rng_uniform(&rng, -2.0, 2.0);
    for (uint32_t n = 1; n <= nmax; n += (n < 14 ? 1 : 9)) {
        fn(&L.d, x, ldx, n, y, L.d.ldw);
        for (uint32_t i = 0; i < n; i++) {
            /* Against a double reference, relative to the sum of |terms|. */
            for (uint32_t j = 0; j < out; j++) {
                double ref = L.d.bias[j], mag = fabs(ref);
                for (uint32_t k = 0; k < in; k++) {
                    double t = (double)x[(size_t)i * ldx + k] * L.w[(size_t)j * in + k];
                    ref += t;
                    mag += fabs(t);
                }
                assert_true(fabs(y[(size_t)i * L.d.ldw + j] - ref) <= 1e-6 * mag + 1e-30);
            }
            for (uint32_t j = out; j < L.d.ldw; j++)
                assert_true(y[(size_t)i * L.d.ldw + j] == 0.0f);
            /* The same row alone gives the same bits. */
            fn(&L.d, x + (size_t)i * ldx, ldx, 1, y1, L.d.ldw);
            assert_memory_equal(y1, y + (size_t)i * L.d.ldw, (size_t)L.d.ldw * 4);
        }
    }
    free(x);
    free(y);
    free(y1);
    layer_free(&L);
}

static void test_dense(void **state)
{
    (void)state;
    const uint32_t shapes[][2] = {{1, 1},  {3, 2},  {4, 64},  {64, 64}, {11, 17},
                                  {64, 3}, {5, 24}, {33, 40}, {100, 9}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        check_dense(ro__dense, shapes[s][0], shapes[s][1]);
        check_dense(ro__dense_portable, shapes[s][0], shapes[s][1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tanh_bit_sweep), cmocka_unit_test(test_tanh_dense_range),
        cmocka_unit_test(test_tanh_special),   cmocka_unit_test(test_tanh_lengths_and_offsets),
        cmocka_unit_test(test_relu),           cmocka_unit_test(test_dense),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
