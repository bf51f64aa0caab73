/*
 * Composite actions (policy_composite.c, policy.h's ro__policy_act_masked):
 * masked values are never drawn (MLP and random, over many draws, with
 * masks that change), the random policy is uniform over what is allowed,
 * one categorical head per MultiDiscrete entry and a Gaussian per box
 * float, log-probabilities summed over parts, draws independent of the
 * batch, and uint8 observations read scaled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/logp.h"
#include "policy_fixture.h"
#include "runtime/error.h"
#include "spaces/layout.h"

#define OBS 5
#define ROWS 200

static const uint32_t nvec[2] = {4, 3};
static const float blo[2] = {-1.0f, 0.0f}, bhi[2] = {1.0f, 5.0f};

/* Tuple(Discrete(6), MultiDiscrete([4, 3]), Box(2)), masked; float32 [5]. */
static void make_layout(ro_space_layout_t *lay, bool with_box)
{
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.num_agents = 1;
    sp.num_obs = 1;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "x", .dtype = RO_DTYPE_FLOAT32, .ndim = 1, .shape = {OBS}};
    sp.num_parts = with_box ? 3 : 2;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 6};
    sp.act[1] = (ro_action_part_t){.kind = RO_SPACE_MULTI_DISCRETE, .n = 2, .nvec = nvec};
    sp.act[2] =
        (ro_action_part_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = blo, .high = bhi};
    sp.action_mask = 1;
    char err[ERRLEN] = "";
    assert_int_equal(ro__layout_from_spaces(lay, &sp, "t", err, sizeof err), 0);
}

static ro_policy_t *make_policy(const ro_space_layout_t *lay, ro_policy_kind_t kind)
{
    ro_policy_spec_t spec = {
        .kind = kind, .hidden = {16, 16}, .nhidden = 2, .activation = RO_ACT_TANH, .seed = 7};
    ro_policy_t *p = NULL;
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_new_layout(&p, &spec, lay, err, sizeof err), 0);
    return p;
}

/* random_masks gives each row a random mask leaving every entry at least
 * one value (the env actor guarantees no less). */
static void random_masks(const ro_space_layout_t *lay, ro_rng_t *g, uint8_t *mask, uint32_t rows)
{
    for (uint32_t r = 0; r < rows; r++) {
        uint8_t *m = mask + (size_t)r * lay->mask_width;
        for (uint32_t d = 0; d < lay->ndisc; d++) {
            uint32_t any = 0;
            for (uint32_t j = 0; j < lay->disc_n[d]; j++)
                any |= m[lay->disc_mask[d] + j] = ro__rng_double(g) < 0.4;
            if (!any)
                m[lay->disc_mask[d] + (uint32_t)(ro__rng_double(g) * lay->disc_n[d])] = 1;
        }
    }
}

static void fill_input(ro_policy_ws_t *ws, ro_rng_t *g, uint32_t rows)
{
    float *in = ro__policy_ws_input(ws);
    for (uint32_t i = 0; i < rows * OBS; i++)
        in[i] = (float)ro__rng_uniform(g, -2.0, 2.0);
}

/* Over 40 000 draws with changing masks no masked value is drawn, and every
 * value that was allowed somewhere is drawn somewhere (no stuck head). */
static void masked_never_drawn(ro_policy_kind_t kind)
{
    ro_space_layout_t lay;
    make_layout(&lay, true);
    ro_policy_t *p = make_policy(&lay, kind);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, ROWS), 0);
    ro_rng_t rng[ROWS], *rngs[ROWS], g;
    for (uint32_t i = 0; i < ROWS; i++) {
        ro__rng_init(&rng[i], 100 + i);
        rngs[i] = &rng[i];
    }
    ro__rng_init(&g, 5);
    uint8_t mask[ROWS * 13];
    int32_t ai[ROWS * 3];
    float af[ROWS * 2], logp[ROWS], mean[ROWS * 2];
    uint32_t drawn[13] = {0};
    for (int round = 0; round < 200; round++) {
        random_masks(&lay, &g, mask, ROWS);
        fill_input(ws, &g, ROWS);
        ro_act_stats_t st = {.logp = logp, .mean = mean};
        ro__policy_act_masked(p, ws, ROWS, rngs, mask, ai, af, &st, NULL);
        for (uint32_t r = 0; r < ROWS; r++) {
            for (uint32_t d = 0; d < 3; d++) {
                int32_t a = ai[r * 3 + d];
                assert_true(a >= 0 && (uint32_t)a < lay.disc_n[d]);
                if (!mask[r * 13 + lay.disc_mask[d] + (uint32_t)a])
                    fail_msg("row %u entry %u drew masked value %d", r, d, a);
                drawn[lay.disc_mask[d] + (uint32_t)a]++;
            }
            assert_true(af[r * 2] >= -1.0f && af[r * 2] <= 1.0f);
            assert_true(af[r * 2 + 1] >= 0.0f && af[r * 2 + 1] <= 5.0f);
            assert_true(isfinite(logp[r]) && logp[r] <= 1e-6f + 2.0f);
        }
    }
    for (uint32_t v = 0; v < 13; v++)
        assert_true(drawn[v] > 100);
    ro__policy_ws_free(ws);
    ro__policy_free(p);
    ro__layout_free(&lay);
}

static void test_masked_never_drawn_mlp(void **state)
{
    (void)state;
    masked_never_drawn(RO_POLICY_MLP);
}

static void test_masked_never_drawn_random(void **state)
{
    (void)state;
    masked_never_drawn(RO_POLICY_RANDOM);
}

/* The random policy is uniform over the allowed values: with values 1 and
 * 4 of Discrete(6) allowed, each comes about half the time; its logp is
 * -log 2 - log 4 - log 3 - log(1 x 5) (the box's ranges). */
static void test_random_uniform_over_allowed(void **state)
{
    (void)state;
    ro_space_layout_t lay;
    make_layout(&lay, true);
    ro_policy_t *p = make_policy(&lay, RO_POLICY_RANDOM);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, 1), 0);
    ro_rng_t rng, *rngs[1] = {&rng};
    ro__rng_init(&rng, 3);
    uint8_t mask[13];
    memset(mask, 1, sizeof mask);
    memset(mask, 0, 6);
    mask[1] = mask[4] = 1;
    uint32_t n1 = 0, n4 = 0;
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        int32_t ai[3];
        float af[2], lp;
        ro_act_stats_t st = {.logp = &lp};
        ro__policy_act_masked(p, ws, 1, rngs, mask, ai, af, &st, NULL);
        n1 += ai[0] == 1;
        n4 += ai[0] == 4;
        assert_true(fabsf(lp - (float)(-log(2.0) - log(4.0) - log(3.0) - log(2.0 * 5.0))) < 1e-5f);
    }
    assert_int_equal(n1 + n4, N);
    assert_true(fabs((double)n1 / N - 0.5) < 0.02); /* 5.6 standard deviations */
    ro__policy_ws_free(ws);
    ro__policy_free(p);
    ro__layout_free(&lay);
}

/* One categorical head per entry and a Gaussian per box float: the head is
 * 6 + 4 + 3 logits and 2 means, and each row's log-probability is the sum
 * of each entry's masked log-softmax and the box's Gaussian log density. */
static void test_heads_and_summed_logp(void **state)
{
    (void)state;
    ro_space_layout_t lay;
    make_layout(&lay, true);
    assert_int_equal(lay.head_width, 15);
    ro_policy_t *p = make_policy(&lay, RO_POLICY_MLP);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, ROWS), 0);
    ro_rng_t rng[ROWS], *rngs[ROWS], g;
    for (uint32_t i = 0; i < ROWS; i++) {
        ro__rng_init(&rng[i], 900 + i);
        rngs[i] = &rng[i];
    }
    ro__rng_init(&g, 11);
    uint8_t mask[ROWS * 13];
    random_masks(&lay, &g, mask, ROWS);
    fill_input(ws, &g, ROWS);
    float head[ROWS * 15];
    ro__policy_forward(p, ws, ROWS, head, NULL);
    int32_t ai[ROWS * 3];
    float af[ROWS * 2], logp[ROWS], mean[ROWS * 2];
    ro_act_stats_t st = {.logp = logp, .mean = mean};
    ro__policy_act_masked(p, ws, ROWS, rngs, mask, ai, af, &st, NULL);
    const float std[2] = {1.0f, 1.0f}, log_std[2] = {0.0f, 0.0f};
    for (uint32_t r = 0; r < ROWS; r++) {
        const float *h = head + r * 15;
        double want = 0.0;
        for (uint32_t d = 0; d < 3; d++) {
            const uint8_t *m = mask + r * 13 + lay.disc_mask[d];
            double mx = -INFINITY, tot = 0.0;
            for (uint32_t j = 0; j < lay.disc_n[d]; j++)
                if (m[j] && h[lay.disc_head[d] + j] > mx)
                    mx = h[lay.disc_head[d] + j];
            for (uint32_t j = 0; j < lay.disc_n[d]; j++)
                if (m[j])
                    tot += exp(h[lay.disc_head[d] + j] - mx);
            want += h[lay.disc_head[d] + (uint32_t)ai[r * 3 + d]] - mx - log(tot);
        }
        assert_true(mean[r * 2] == h[lay.box_head[0]] && mean[r * 2 + 1] == h[lay.box_head[1]]);
        want += ro__logp_gaussian(h + lay.box_head[0], 1, af + r * 2, std, log_std, 2);
        if (fabs(logp[r] - want) > 1e-4 * (1.0 + fabs(want)))
            fail_msg("row %u: logp %g, want %g", r, (double)logp[r], want);
    }
    ro__policy_ws_free(ws);
    ro__policy_free(p);
    ro__layout_free(&lay);
}

/* A row's actions depend on its own stream only: one batch of 70 rows, or
 * each row alone, draw the same. */
static void test_draws_independent_of_batch(void **state)
{
    (void)state;
    enum { N = 70 };
    ro_space_layout_t lay;
    make_layout(&lay, true);
    ro_policy_t *p = make_policy(&lay, RO_POLICY_MLP);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, N), 0);
    ro_rng_t rng[N], *rngs[N], g;
    ro__rng_init(&g, 12);
    uint8_t mask[N * 13];
    random_masks(&lay, &g, mask, N);
    float in[N * OBS];
    for (uint32_t i = 0; i < N * OBS; i++)
        in[i] = (float)ro__rng_uniform(&g, -1.0, 1.0);
    int32_t ai[2][N * 3];
    float af[2][N * 2];
    for (uint32_t i = 0; i < N; i++) {
        ro__rng_init(&rng[i], 40 + i);
        rngs[i] = &rng[i];
    }
    memcpy(ro__policy_ws_input(ws), in, sizeof in);
    ro__policy_act_masked(p, ws, N, rngs, mask, ai[0], af[0], NULL, NULL);
    for (uint32_t i = 0; i < N; i++) {
        ro__rng_init(&rng[i], 40 + i);
        memcpy(ro__policy_ws_input(ws), in + i * OBS, OBS * sizeof(float));
        ro__policy_act_masked(p, ws, 1, rngs + i, mask + i * 13, ai[1] + i * 3, af[1] + i * 2, NULL,
                              NULL);
    }
    assert_memory_equal(ai[0], ai[1], sizeof ai[0]);
    assert_memory_equal(af[0], af[1], sizeof af[0]);
    ro__policy_ws_free(ws);
    ro__policy_free(p);
    ro__layout_free(&lay);
}

/* A uint8 tensor with one Discrete action: the ABI 1 MLP over the
 * flattened row (obs_width inputs, x / 255), the same weights as a policy
 * built for a float box of that width. */
static void test_uint8_observation_policy(void **state)
{
    (void)state;
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.num_obs = 2;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "px", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {2, 3}};
    sp.obs[1] = (ro_tensor_space_t){.name = "id", .dtype = RO_DTYPE_INT32, .ndim = 1, .shape = {1}};
    sp.num_parts = 1;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    ro_space_layout_t lay;
    char err[ERRLEN] = "";
    assert_int_equal(ro__layout_from_spaces(&lay, &sp, "u8", err, sizeof err), 0);
    assert_true(lay.simple_act && !lay.plain_obs);
    ro_policy_t *p = make_policy(&lay, RO_POLICY_MLP), *q = NULL;
    assert_int_equal(ro__policy_obs_dim(p), 7);
    assert_ptr_equal(ro__policy_layout(p), &lay);
    ro_space_t ob = obs_box(7), ac = act_discrete(3);
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP,
                             .hidden = {16, 16},
                             .nhidden = 2,
                             .activation = RO_ACT_TANH,
                             .seed = 7};
    assert_int_equal(ro__policy_new(&q, &spec, &ob, &ac, err, sizeof err), 0);
    uint8_t px[2][6] = {{0, 255, 17, 34, 200, 1}, {9, 8, 7, 6, 5, 4}};
    int32_t id[2] = {3, -2};
    const uint8_t *t[2] = {&px[0][0], (const uint8_t *)id};
    ro_policy_ws_t *wp, *wq;
    assert_int_equal(ro__policy_ws_new(&wp, p, 2), 0);
    assert_int_equal(ro__policy_ws_new(&wq, q, 2), 0);
    ro__layout_flatten(&lay, t, 2, ro__policy_ws_input(wp));
    float *in = ro__policy_ws_input(wq);
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 6; i++)
            in[r * 7 + i] = (float)px[r][i] / 255.0f;
        in[r * 7 + 6] = (float)id[r];
    }
    float hp[6], hq[6];
    ro__policy_forward(p, wp, 2, hp, NULL);
    ro__policy_forward(q, wq, 2, hq, NULL);
    assert_memory_equal(hp, hq, sizeof hp);
    ro__policy_ws_free(wp);
    ro__policy_ws_free(wq);
    ro__policy_free(p);
    ro__policy_free(q);
    ro__layout_free(&lay);
}

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("policy_composite");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_masked_never_drawn_mlp),
        cmocka_unit_test(test_masked_never_drawn_random),
        cmocka_unit_test(test_random_uniform_over_allowed),
        cmocka_unit_test(test_heads_and_summed_logp),
        cmocka_unit_test(test_draws_independent_of_batch),
        cmocka_unit_test(test_uint8_observation_policy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
