/*
 * spaces/layout: an env's spaces laid out (offsets, widths, the head and
 * the mask), every check naming its field, the ABI 1 shim, flattening
 * (uint8 scaled by 1/255, int32 converted) and the mask check.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "runtime/error.h"
#include "spaces/layout.h"

static void assert_contains(const char *msg, const char *part)
{
    if (strstr(msg, part) == NULL)
        fail_msg("message '%s' lacks '%s'", msg, part);
}

static const uint32_t nvec[2] = {3, 2};
static const float blo[2] = {-1.0f, 0.0f}, bhi[2] = {1.0f, 5.0f};

/* A Dict of three tensors, three agents, Tuple(MultiDiscrete([3, 2]),
 * Box(2), MultiBinary(2), Discrete(4)) with a mask. */
static ro_env_spaces_t rich(void)
{
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = 3;
    sp.num_obs = 3;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "img", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {2, 3}};
    sp.obs[1] =
        (ro_tensor_space_t){.name = "vec", .dtype = RO_DTYPE_FLOAT32, .ndim = 1, .shape = {4}};
    sp.obs[2] =
        (ro_tensor_space_t){.name = "ids", .dtype = RO_DTYPE_INT32, .ndim = 1, .shape = {2}};
    sp.num_parts = 4;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_MULTI_DISCRETE, .n = 2, .nvec = nvec};
    sp.act[1] =
        (ro_action_part_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = blo, .high = bhi};
    sp.act[2] = (ro_action_part_t){.kind = RO_SPACE_MULTI_BINARY, .n = 2};
    sp.act[3] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 4};
    sp.action_mask = 1;
    return sp;
}

static void test_rich_layout(void **state)
{
    (void)state;
    ro_env_spaces_t sp = rich();
    ro_space_layout_t lay;
    char err[256] = "";
    assert_int_equal(ro__layout_from_spaces(&lay, &sp, "rich", err, sizeof err), 0);
    assert_int_equal(lay.agents, 3);
    assert_int_equal(lay.obs_width, 6 + 4 + 2);
    assert_int_equal(lay.obs_bytes, 6 + 16 + 8);
    assert_int_equal(lay.t[0].flat_off, 0);
    assert_int_equal(lay.t[1].flat_off, 6);
    assert_int_equal(lay.t[2].flat_off, 10);
    assert_int_equal(lay.t[0].row_bytes, 6);
    assert_int_equal(lay.t[2].row_bytes, 8);
    /* Discrete entries: the MultiDiscrete's 2, the MultiBinary's 2, the Discrete. */
    assert_int_equal(lay.ndisc, 5);
    assert_int_equal(lay.nbox, 2);
    const uint32_t n[5] = {3, 2, 2, 2, 4}, head[5] = {0, 3, 7, 9, 11}, mask[5] = {0, 3, 5, 7, 9};
    for (int d = 0; d < 5; d++) {
        assert_int_equal(lay.disc_n[d], n[d]);
        assert_int_equal(lay.disc_head[d], head[d]);
        assert_int_equal(lay.disc_mask[d], mask[d]);
    }
    /* The Box's means sit between the MultiDiscrete's logits and the rest. */
    assert_int_equal(lay.box_head[0], 5);
    assert_int_equal(lay.box_head[1], 6);
    assert_true(lay.box_low[1] == 0.0f && lay.box_high[1] == 5.0f);
    assert_int_equal(lay.head_width, 15);
    assert_int_equal(lay.mask_width, 13);
    assert_int_equal(lay.part[2].first, 2);
    assert_int_equal(lay.part[3].first, 4);
    assert_int_equal(lay.part[1].first, 0);
    assert_false(lay.plain_obs);
    assert_false(lay.simple_act);
    assert_false(lay.abi1);
    /* uint8 tensors without bounds get the dtype's range. */
    assert_true(lay.t[0].low[0] == 0.0f && lay.t[0].high[5] == 255.0f);
    assert_true(isinf(lay.t[1].high[0]));
    char what[200];
    ro__layout_abi2_features(&lay, what, sizeof what);
    assert_string_equal(what, "3 agents, 3 observation tensors, uint8 observations, int32 "
                              "observations, a Tuple action, a MultiDiscrete action, a "
                              "MultiBinary action and an action mask");
    ro_space_t o, a;
    assert_false(ro__layout_abi1_view(&lay, &o, &a));
    ro__layout_free(&lay);
    ro__layout_free(&lay); /* a freed layout is empty: again is harmless */
}

/* The ABI 1 shim: one float32 tensor "obs", the action as it was. */
static void test_abi1_shim(void **state)
{
    (void)state;
    const float lo[4] = {-1, -2, -3, -4}, hi[4] = {1, 2, 3, 4};
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 2, .shape = {2, 2}, .low = lo, .high = hi};
    ro_space_t disc = {.kind = RO_SPACE_DISCRETE, .n = 7};
    ro_space_t box = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = blo, .high = bhi};
    ro_space_layout_t lay;
    char err[256] = "";
    assert_int_equal(ro__layout_from_abi1(&lay, &obs, &disc, "one", err, sizeof err), 0);
    assert_true(lay.abi1 && lay.plain_obs && lay.simple_act);
    assert_string_equal(lay.t[0].name, "obs");
    assert_int_equal(lay.obs_width, 4);
    assert_int_equal(lay.head_width, 7);
    ro_space_t o, a;
    assert_true(ro__layout_abi1_view(&lay, &o, &a));
    assert_int_equal(o.ndim, 2);
    assert_int_equal(o.shape[1], 2);
    assert_true(o.low[3] == -4.0f && o.high[3] == 4.0f);
    assert_int_equal(a.kind, RO_SPACE_DISCRETE);
    assert_int_equal(a.n, 7);
    char what[64];
    ro__layout_abi2_features(&lay, what, sizeof what);
    assert_string_equal(what, "");
    ro__layout_free(&lay);

    assert_int_equal(ro__layout_from_abi1(&lay, &obs, &box, "one", err, sizeof err), 0);
    assert_true(lay.abi1);
    assert_int_equal(lay.nbox, 2);
    assert_int_equal(lay.ndisc, 0);
    assert_true(ro__layout_abi1_view(&lay, &o, &a));
    assert_int_equal(a.kind, RO_SPACE_BOX);
    assert_true(a.low[0] == -1.0f && a.high[1] == 5.0f);
    ro__layout_free(&lay);
}

/* Every broken field is refused with a message naming it. */
static void test_checks_name_the_field(void **state)
{
    (void)state;
    static const float nan_lo[3] = {0, NAN, 0}, hi3[3] = {1, 1, 1};
    static const uint32_t bad_nvec[2] = {3, 0};
    struct {
        const char *words;
        ro_env_spaces_t sp;
    } c[20];
    int k = 0;
    for (int i = 0; i < 20; i++)
        c[i].sp = rich();
    c[k].words = "env 't': num_agents is 5000; expected 1..1024";
    c[k++].sp.num_agents = 5000;
    c[k].words = "num_obs is 0; expected 1..8 observation tensors";
    c[k++].sp.num_obs = 0;
    c[k].words = "obs[0] has name NULL; expected 1..31 characters of [A-Za-z0-9_]";
    c[k++].sp.obs[0].name = NULL;
    c[k].words = "obs[1] has name 'a b'";
    c[k++].sp.obs[1].name = "a b";
    c[k].words = "obs[2] ('img') has the name of obs[0]";
    c[k++].sp.obs[2].name = "img";
    c[k].words = "obs[1] ('vec') has dtype 0; expected uint8 (1)";
    c[k++].sp.obs[1].dtype = (ro_dtype_t)0;
    c[k].words = "obs[0] ('img') has 5 dims; expected 1..4";
    c[k++].sp.obs[0].ndim = 5;
    c[k].words = "obs[0] ('img') has shape[1] = 0";
    c[k++].sp.obs[0].shape[1] = 0;
    c[k].words = "obs[2] ('ids')'s high bounds are NULL (give both or neither)";
    c[k++].sp.obs[2].low = hi3;
    c[k].sp.obs[2].shape[0] = 3;
    c[k].sp.obs[2].low = nan_lo;
    c[k].sp.obs[2].high = hi3;
    c[k++].words = "obs[2] ('ids')'s bounds [nan, 1] at 1 are not a range";
    c[k].words = "num_parts is 9; expected 1..8 action parts";
    c[k++].sp.num_parts = 9;
    c[k].words = "act[0] (MultiDiscrete) has nvec NULL";
    c[k++].sp.act[0].nvec = NULL;
    c[k].words = "act[0] (MultiDiscrete) has nvec[1] = 0; expected 1..";
    c[k++].sp.act[0].nvec = bad_nvec;
    c[k].words = "act[3] (Discrete) has n = 0";
    c[k++].sp.act[3].n = 0;
    c[k].words = "act[2] (MultiBinary) has n = 0 entries";
    c[k++].sp.act[2].n = 0;
    c[k].words = "act[1]'s low bounds are NULL";
    c[k++].sp.act[1].low = NULL;
    c[k].words = "act[3] has kind 7; expected Discrete (1), Box (2)";
    c[k++].sp.act[3].kind = (ro_space_kind_t)7;
    c[k].words = "action_mask is 2; expected 0 or 1";
    c[k++].sp.action_mask = 2;
    c[k].sp.num_parts = 1;
    c[k].sp.act[0] = c[k].sp.act[1]; /* a Box alone cannot be masked */
    c[k++].words = "action_mask is 1 but no action part is discrete";
    for (int i = 0; i < k; i++) {
        ro_space_layout_t lay;
        char err[256] = "";
        assert_int_equal(ro__layout_from_spaces(&lay, &c[i].sp, "t", err, sizeof err), RO_EINVAL);
        assert_contains(err, "env 't': ");
        assert_contains(err, c[i].words);
        assert_null(lay.disc_n); /* nothing left to free */
    }
}

static void test_metric_names(void **state)
{
    (void)state;
    ro_env_spaces_t sp = rich();
    ro_space_layout_t lay;
    char err[256] = "";
    assert_int_equal(ro__layout_from_spaces(&lay, &sp, "t", err, sizeof err), 0);
    const char *ok[] = {"score", "success", NULL};
    assert_int_equal(ro__layout_set_metrics(&lay, ok, "t", err, sizeof err), 0);
    assert_int_equal(lay.nmetrics, 2);
    assert_string_equal(lay.metric[1], "success");
    const char *twice[] = {"score", "score", NULL};
    assert_int_equal(ro__layout_set_metrics(&lay, twice, "t", err, sizeof err), RO_EINVAL);
    assert_contains(err, "metric_names[1] ('score') is listed twice");
    const char *bad[] = {"sco-re", NULL};
    assert_int_equal(ro__layout_set_metrics(&lay, bad, "t", err, sizeof err), RO_EINVAL);
    assert_contains(err, "metric_names[0] is 'sco-re'");
    const char *many[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", NULL};
    assert_int_equal(ro__layout_set_metrics(&lay, many, "t", err, sizeof err), RO_EINVAL);
    assert_contains(err, "more than 8 metrics");
    assert_int_equal(ro__layout_set_metrics(&lay, NULL, "t", err, sizeof err), 0);
    assert_int_equal(lay.nmetrics, 0);
    ro__layout_free(&lay);
}

/* Rows flatten tensor after tensor: uint8 scaled by 1/255, int32 as
 * floats, float32 copied. */
static void test_flatten(void **state)
{
    (void)state;
    ro_env_spaces_t sp = rich();
    ro_space_layout_t lay;
    char err[256] = "";
    assert_int_equal(ro__layout_from_spaces(&lay, &sp, "t", err, sizeof err), 0);
    enum { ROWS = 2 };
    uint8_t img[ROWS][6] = {{0, 51, 102, 128, 254, 255}, {255, 0, 1, 2, 3, 4}};
    float vec[ROWS][4] = {{0.5f, -1.5f, 1e30f, 0.0f}, {1, 2, 3, 4}};
    int32_t ids[ROWS][2] = {{-7, 123456}, {0, 1}};
    const uint8_t *t[3] = {&img[0][0], (const uint8_t *)&vec[0][0], (const uint8_t *)&ids[0][0]};
    float out[ROWS][12];
    ro__layout_flatten(&lay, t, ROWS, &out[0][0]);
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < 6; i++) {
            assert_true(out[r][i] >= 0.0f && out[r][i] <= 1.0f);
            assert_true(out[r][i] == (float)img[r][i] / 255.0f);
        }
        for (int i = 0; i < 4; i++)
            assert_true(out[r][6 + i] == vec[r][i]);
        for (int i = 0; i < 2; i++)
            assert_true(out[r][10 + i] == (float)ids[r][i]);
    }
    assert_true(out[0][5] == 1.0f && out[0][0] == 0.0f && out[1][0] == 1.0f);
    ro__layout_free(&lay);
}

static void test_mask_ok(void **state)
{
    (void)state;
    ro_env_spaces_t sp = rich();
    ro_space_layout_t lay;
    char err[256] = "";
    assert_int_equal(ro__layout_from_spaces(&lay, &sp, "t", err, sizeof err), 0);
    uint8_t m[13];
    memset(m, 1, sizeof m);
    uint32_t entry = 99;
    assert_true(ro__layout_mask_ok(&lay, m, &entry));
    m[0] = m[2] = 0; /* entry 0 keeps value 1 */
    assert_true(ro__layout_mask_ok(&lay, m, &entry));
    m[7] = m[8] = 0; /* MultiBinary entry 1 (entry 3): neither 0 nor 1 */
    assert_false(ro__layout_mask_ok(&lay, m, &entry));
    assert_int_equal(entry, 3);
    ro__layout_free(&lay);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rich_layout),
        cmocka_unit_test(test_abi1_shim),
        cmocka_unit_test(test_checks_name_the_field),
        cmocka_unit_test(test_metric_names),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_mask_ok),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
