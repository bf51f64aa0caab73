#include "policy/activation.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RO_DENSE_AVX2 1
#endif

/*
 * The element functions below are written for GCC's vectorizer: straight
 * line code, selects instead of branches, bit operations through memcpy
 * (which compiles to nothing), no calls once inlined. The loops over arrays
 * then vectorize at -O3, and target_clones builds each loop twice: an AVX2
 * clone (8 floats a step) and a baseline SSE2 one (4), picked once by the
 * dynamic loader from the CPU, so AVX2 machines get the wide code without
 * -march flags that would make the binary unportable. Both clones perform
 * the same IEEE operations in the same order (no FMA: -std=c11 keeps
 * contraction off), so their results are bitwise equal.
 */

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/*
 * tanh_elem computes tanh(x) as e / (e + 2) with e = expm1(2|x|), then puts
 * the sign of x back: working on |x| makes the result exactly odd, and
 * expm1 (rather than 1 - 2 / (exp(2x) + 1)) keeps the relative accuracy for
 * small |x| where tanh(x) ~ x. Beyond |x| = 9, tanh(x) rounds to 1 in float,
 * so the argument is clamped there, which also bounds 2^k below.
 *
 * expm1(t) for t in [0, 18]: t = k ln2 + r with k = round(t / ln2) and
 * |r| <= ln2 / 2; then expm1(t) = 2^k expm1(r) + (2^k - 1). ln2 is split in
 * two so that k * LN2_HI is exact and r keeps its low bits; expm1(r) is its
 * Taylor series to r^6 (truncation below 5e-7 relative; over all floats the
 * result is within 1.1e-7 of tanh).
 */
static inline float tanh_elem(float x)
{
    const float LOG2E = 1.44269504f;
    const float LN2_HI = 0.693145751953125f; /* 15 significant bits */
    const float LN2_LO = 1.42860682e-6f;     /* ln2 - LN2_HI */
    const float ROUND = 0x1.8p23f;           /* adding it rounds to an integer */

    /* The argument is clamped on its bits: for non-negative floats the
     * integer order is the float order, and a NaN (bits above +inf) is
     * clamped too, so the int conversion below never sees one; the NaN is
     * put back at the end through a mask. Float compares and selects here
     * would make GCC branch around the division, and a loop with branches
     * does not vectorize. */
    const uint32_t xb = f2u(x);
    const int32_t ab = (int32_t)(xb & 0x7fffffffu);
    const uint32_t nan = 0u - (uint32_t)(ab > 0x7f800000);              /* all ones for a NaN */
    const float a = u2f((uint32_t)(ab < 0x41100000 ? ab : 0x41100000)); /* min(|x|, 9.0f) */

    float t = a + a;
    float kf = (t * LOG2E + ROUND) - ROUND;
    float r = (t - kf * LN2_HI) - kf * LN2_LO;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r;                                          /* expm1(r) */
    float s = u2f((uint32_t)((int32_t)kf + 127) << 23); /* 2^k, k in [0, 26] */
    float e = s * p + (s - 1.0f);
    float th = e / (e + 2.0f);

    /* For a NaN, th is about 1 (0x3f80....): or-ing in the NaN's bits
     * keeps an all-ones exponent and a non-zero mantissa, so a NaN. */
    return u2f(f2u(th) | (xb & 0x80000000u) | (xb & nan));
}

/* ThreadSanitizer's runtime is not up yet when an ifunc resolver runs at
 * load time, so TSan builds get the portable loop only; so does clang 14
 * (the fuzz builds), whose target_clones does not emit the symbols. */
#if defined(__SANITIZE_THREAD__) || defined(__clang__)
#define RO_CLONES
#else
#define RO_CLONES __attribute__((target_clones("avx2", "default")))
#endif

RO_CLONES void ro__act_tanh(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tanh_elem(x[i]);
}

RO_CLONES void ro__act_relu(float *x, size_t n)
{
    /* x < 0 is false for NaN, which therefore passes through. */
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] < 0.0f ? 0.0f : x[i];
}

/*
 * The dense layer is our own kernel rather than cblas_sgemm because
 * OpenBLAS's sgemm does not compute a row the same way wherever it sits: its
 * micro-kernels split the batch into blocks and the edge blocks accumulate
 * in another order, so the same observation gives outputs differing in the
 * last bits depending on the batch size and its position in the batch
 * (measured with OpenBLAS 0.3.21, Haswell kernels: for 64x64 layers, the rows
 * of a 12-row block fall into different classes). A sampled action is a
 * function of those bits, and the learner batches whatever envs happen to
 * be ready, so trajectories would depend on timing. Here every output is
 * bias + x[0] w[0] + x[1] w[1] + ... in k order, one rounding per step
 * (FMA), whichever block the row falls in.
 *
 * Blocking: 6 rows by 16 columns of accumulators (12 AVX2 registers) stay
 * in registers over the whole k loop; each step loads two weight vectors and
 * broadcasts one input per row. That reaches the FMA throughput of the core
 * for these small layers, about what OpenBLAS gets.
 */

void ro__dense_portable(const ro_dense_t *l, const float *x, size_t ldx, uint32_t n, float *y,
                        size_t ldy)
{
    const size_t ldw = l->ldw;
    for (uint32_t i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * ldx;
        float *yr = y + (size_t)i * ldy;
        for (size_t j = 0; j < ldw; j += RO_DENSE_PAD) {
            float acc[RO_DENSE_PAD];
            for (int c = 0; c < RO_DENSE_PAD; c++)
                acc[c] = l->bias[j + c];
            const float *w = l->wt + j;
            for (uint32_t k = 0; k < l->in; k++, w += ldw) {
                const float xv = xr[k];
                for (int c = 0; c < RO_DENSE_PAD; c++)
                    acc[c] += w[c] * xv;
            }
            for (int c = 0; c < RO_DENSE_PAD; c++)
                yr[j + c] = acc[c];
        }
    }
}

#ifdef RO_DENSE_AVX2

#define RO_AVX2 __attribute__((target("avx2,fma")))
#define RO_BLOCK_ROWS 6

/* rows_avx2 computes columns j.. of R consecutive rows (R <= RO_BLOCK_ROWS,
 * a constant after inlining, so the accumulator arrays live in registers). */
RO_AVX2 __attribute__((always_inline)) static inline void rows_avx2(const ro_dense_t *l,
                                                                    const float *x, size_t ldx,
                                                                    float *y, size_t ldy,
                                                                    const int R, size_t j)
{
    const size_t ldw = l->ldw;
    for (; j + 16 <= ldw; j += 16) {
        __m256 a0[RO_BLOCK_ROWS], a1[RO_BLOCK_ROWS];
        const __m256 b0 = _mm256_load_ps(l->bias + j);
        const __m256 b1 = _mm256_load_ps(l->bias + j + 8);
        for (int r = 0; r < R; r++) {
            a0[r] = b0;
            a1[r] = b1;
        }
        const float *w = l->wt + j;
        for (uint32_t k = 0; k < l->in; k++, w += ldw) {
            const __m256 w0 = _mm256_load_ps(w);
            const __m256 w1 = _mm256_load_ps(w + 8);
            for (int r = 0; r < R; r++) {
                const __m256 xv = _mm256_broadcast_ss(x + (size_t)r * ldx + k);
                a0[r] = _mm256_fmadd_ps(w0, xv, a0[r]);
                a1[r] = _mm256_fmadd_ps(w1, xv, a1[r]);
            }
        }
        for (int r = 0; r < R; r++) {
            _mm256_store_ps(y + (size_t)r * ldy + j, a0[r]);
            _mm256_store_ps(y + (size_t)r * ldy + j + 8, a1[r]);
        }
    }
    if (j < ldw) { /* the last 8 columns when ldw is not a multiple of 16 */
        __m256 a0[RO_BLOCK_ROWS];
        const __m256 b0 = _mm256_load_ps(l->bias + j);
        for (int r = 0; r < R; r++)
            a0[r] = b0;
        const float *w = l->wt + j;
        for (uint32_t k = 0; k < l->in; k++, w += ldw) {
            const __m256 w0 = _mm256_load_ps(w);
            for (int r = 0; r < R; r++) {
                const __m256 xv = _mm256_broadcast_ss(x + (size_t)r * ldx + k);
                a0[r] = _mm256_fmadd_ps(w0, xv, a0[r]);
            }
        }
        for (int r = 0; r < R; r++)
            _mm256_store_ps(y + (size_t)r * ldy + j, a0[r]);
    }
}

/* row1_avx2 computes one row, 64 columns at a time: a lone row in the
 * 16-column loop would wait on the FMA latency with its two accumulators;
 * eight independent ones keep the FMA units busy. */
RO_AVX2 static void row1_avx2(const ro_dense_t *l, const float *x, float *y)
{
    const size_t ldw = l->ldw;
    size_t j = 0;
    for (; j + 64 <= ldw; j += 64) {
        __m256 a[8];
        for (int c = 0; c < 8; c++)
            a[c] = _mm256_load_ps(l->bias + j + 8 * c);
        const float *w = l->wt + j;
        for (uint32_t k = 0; k < l->in; k++, w += ldw) {
            const __m256 xv = _mm256_broadcast_ss(x + k);
            for (int c = 0; c < 8; c++)
                a[c] = _mm256_fmadd_ps(_mm256_load_ps(w + 8 * c), xv, a[c]);
        }
        for (int c = 0; c < 8; c++)
            _mm256_store_ps(y + j + 8 * c, a[c]);
    }
    rows_avx2(l, x, 0, y, 0, 1, j);
}

RO_AVX2 static void dense_avx2(const ro_dense_t *l, const float *x, size_t ldx, uint32_t n,
                               float *y, size_t ldy)
{
    uint32_t i = 0;
    for (; i + RO_BLOCK_ROWS <= n; i += RO_BLOCK_ROWS)
        rows_avx2(l, x + (size_t)i * ldx, ldx, y + (size_t)i * ldy, ldy, RO_BLOCK_ROWS, 0);
    /* The rest (0..5 rows): a block of 3, then single rows. How rows are
     * grouped changes only which loads they share, not their arithmetic. */
    if (i + 3 <= n) {
        rows_avx2(l, x + (size_t)i * ldx, ldx, y + (size_t)i * ldy, ldy, 3, 0);
        i += 3;
    }
    for (; i < n; i++)
        row1_avx2(l, x + (size_t)i * ldx, y + (size_t)i * ldy);
}

#endif

void ro__dense(const ro_dense_t *l, const float *x, size_t ldx, uint32_t n, float *y, size_t ldy)
{
#ifdef RO_DENSE_AVX2
    /* Reads a word libgcc filled in at start-up: cheap enough per call. */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        dense_avx2(l, x, ldx, n, y, ldy);
        return;
    }
#endif
    ro__dense_portable(l, x, ldx, n, y, ldy);
}
