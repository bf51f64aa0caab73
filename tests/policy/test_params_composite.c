/*
 * Format-2 weights files (params_layout.h): a composite policy (env ABI 2)
 * saved and loaded acts bit for bit as the one saved, log_std included; a
 * typed-input policy records its tensors; every difference between the
 * file's layout and the env's is refused with a message naming it; format
 * 1 files still load where they fit; a newer format, a truncated file and
 * malformed layouts are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/params.h"
#include "policy/policy_internal.h"
#include "policy_fixture.h"
#include "runtime/error.h"
#include "spaces/layout.h"
#include "wire/varint.h"

#define ROWS 64

/* What make_layout varies, one thing at a time. */
typedef struct variant {
    const char *name;       /* tensor name ("x") */
    ro_dtype_t dtype;       /* RO_DTYPE_FLOAT32 */
    uint32_t ndim;          /* 1: [6]; 2: [2, 3] */
    uint32_t width;         /* 6 */
    uint32_t nvec[2];       /* {4, 3} */
    ro_space_kind_t second; /* MULTI_DISCRETE */
    bool mask;              /* true */
    bool box;               /* true */
} variant_t;

static variant_t base(void)
{
    return (variant_t){.name = "x",
                       .dtype = RO_DTYPE_FLOAT32,
                       .ndim = 1,
                       .width = 6,
                       .nvec = {4, 3},
                       .second = RO_SPACE_MULTI_DISCRETE,
                       .mask = true,
                       .box = true};
}

static const float blo[2] = {-1.0f, 0.0f}, bhi[2] = {1.0f, 5.0f};

/* Tuple(Discrete(6), MultiDiscrete(nvec), Box(2)), masked, over one tensor. */
static void make_layout(ro_space_layout_t *lay, const variant_t *v)
{
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.num_agents = 1;
    sp.num_obs = 1;
    sp.obs[0] = (ro_tensor_space_t){.dtype = v->dtype, .ndim = v->ndim};
    sp.obs[0].name = v->name;
    sp.obs[0].shape[0] = v->ndim == 1 ? v->width : 2;
    sp.obs[0].shape[1] = v->width / 2;
    sp.num_parts = v->box ? 3 : 2;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 6};
    sp.act[1] = (ro_action_part_t){.kind = v->second, .n = 2, .nvec = v->nvec};
    sp.act[2] =
        (ro_action_part_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = blo, .high = bhi};
    sp.action_mask = v->mask;
    char err[ERRLEN] = "";
    if (ro__layout_from_spaces(lay, &sp, "t", err, sizeof err) != 0)
        fail_msg("layout: %s", err);
}

static ro_policy_spec_t spec_of(const char *path, uint64_t seed)
{
    ro_policy_spec_t s = mlp_spec(16, 8, RO_ACT_TANH, seed);
    s.params_path = path;
    return s;
}

static ro_policy_t *build(const ro_space_layout_t *lay, const char *path, uint64_t seed)
{
    ro_policy_spec_t spec = spec_of(path, seed);
    ro_policy_t *p = NULL;
    char err[ERRLEN] = "";
    if (ro__policy_new_layout(&p, &spec, lay, err, sizeof err) != 0)
        fail_msg("ro__policy_new_layout: %s", err);
    return p;
}

/* load_fails loads path for lay and checks the error names want. */
static void load_fails(const ro_space_layout_t *lay, const char *path, int code, const char *want)
{
    ro_policy_spec_t spec = spec_of(path, 1);
    ro_policy_t *p = NULL;
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_new_layout(&p, &spec, lay, err, sizeof err), code);
    assert_null(p);
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not say \"%s\"", err, want);
}

/* act runs p over ROWS seeded rows (inputs, masks, generators from seed)
 * into ai, af, logp. */
static void act(const ro_policy_t *p, uint64_t seed, int32_t *ai, float *af, float *logp)
{
    const ro_space_layout_t *lay = ro__policy_layout(p);
    ro_policy_ws_t *ws;
    assert_int_equal(ro__policy_ws_new(&ws, p, ROWS), 0);
    ro_rng_t rng[ROWS], *rngs[ROWS], g;
    for (uint32_t i = 0; i < ROWS; i++) {
        ro__rng_init(&rng[i], seed + i);
        rngs[i] = &rng[i];
    }
    ro__rng_init(&g, seed);
    float *in = ro__policy_ws_input(ws);
    for (uint32_t i = 0; i < ROWS * lay->obs_width; i++)
        in[i] = (float)ro__rng_uniform(&g, -2.0, 2.0);
    uint8_t *mask = lay->mask_width ? malloc((size_t)ROWS * lay->mask_width) : NULL;
    for (uint32_t i = 0; mask && i < ROWS * lay->mask_width; i++)
        mask[i] = ro__rng_double(&g) < 0.7 || i % 2 == 0; /* every entry keeps a value */
    ro_act_stats_t st = {.logp = logp};
    ro__policy_act_masked(p, ws, ROWS, rngs, mask, ai, af, &st, NULL);
    free(mask);
    ro__policy_ws_free(ws);
}

/* A composite policy with non-zero log_std, saved then loaded: the same
 * actions, box floats and log-probabilities, bit for bit; the file is
 * format 2 with action_kind "composite". */
static void test_composite_round_trip(void **state)
{
    (void)state;
    variant_t v = base();
    ro_space_layout_t lay;
    make_layout(&lay, &v);
    ro_policy_t *p = build(&lay, NULL, 11);
    p->box_log_std[0] = 0.25f;
    p->box_log_std[1] = -0.5f;
    for (int j = 0; j < 2; j++)
        p->box_std[j] = (float)exp((double)p->box_log_std[j]);
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_save(p, tmp_path("c.pb"), err, sizeof err), 0);
    ro_policy_t *q = build(&lay, tmp_path("c.pb"), 99); /* the seed is not used */
    int32_t ai[2][ROWS * 3];
    float af[2][ROWS * 2], lp[2][ROWS];
    act(p, 5, ai[0], af[0], lp[0]);
    act(q, 5, ai[1], af[1], lp[1]);
    assert_memory_equal(ai[0], ai[1], sizeof ai[0]);
    assert_memory_equal(af[0], af[1], sizeof af[0]);
    assert_memory_equal(lp[0], lp[1], sizeof lp[0]);
    assert_memory_equal(q->box_log_std, p->box_log_std, 2 * sizeof(float));

    ro_policy_params_t pp;
    assert_int_equal(ro__policy_params_read(&pp, tmp_path("c.pb"), err, sizeof err), 0);
    assert_true(pp.composite);
    assert_int_equal(pp.nlog_std, 2);
    assert_int_equal(pp.action_dim, lay.head_width);
    assert_non_null(pp.layout);
    uint8_t *buf;
    size_t len;
    assert_int_equal(ro__policy_params_encode(&pp, &buf, &len), 0);
    Rollout__V1__PolicyParams *m;
    ro_pb_alloc_t a;
    assert_int_equal(ro__policy_params_unpack(&m, &a, buf, len, "f", err, sizeof err), 0);
    assert_int_equal(m->format_version, 2);
    assert_string_equal(m->action_kind, "composite");
    assert_int_equal(m->layout->n_heads, 5); /* Discrete, 2 entries, 2 floats */
    assert_string_equal(m->layout->heads[2]->kind, "categorical");
    assert_int_equal(m->layout->heads[2]->width, 3);
    assert_string_equal(m->layout->heads[3]->kind, "gaussian");
    rollout__v1__policy_params__free_unpacked(m, &a.base);
    free(buf);
    ro__policy_params_free(&pp);
    ro__policy_free(p);
    ro__policy_free(q);
    ro__layout_free(&lay);
}

/* Each difference in the env's layout is refused, naming it. */
static void test_composite_refusals_name_the_field(void **state)
{
    (void)state;
    variant_t v = base();
    ro_space_layout_t lay;
    make_layout(&lay, &v);
    ro_policy_t *p = build(&lay, NULL, 3);
    char err[ERRLEN] = "";
    char path[160]; /* tmp_path's buffer is reused */
    snprintf(path, sizeof path, "%s", tmp_path("r.pb"));
    assert_int_equal(ro__policy_save(p, path, err, sizeof err), 0);
    static const char *const want[] = {
        "head 1 has 4 logits, the env's MultiDiscrete entry 0 (part 1) has 3 values",
        "input 0 is 'x' but the env's tensor 0 is 'y'",
        "input 0 ('x') is float32 but the env's is uint8",
        "input 0 ('x') has shape [6] but the env's is [2,3]",
        "obs_dim is 6 but the env's flattened row has 8 floats",
        "action part 1 is multi_discrete but the env's is multi_binary",
        "layout.mask_width is 13 but the env's action mask has 0 bytes",
        "action_dim is 15 but the env's action needs 13 head outputs",
    };
    for (size_t c = 0; c < sizeof want / sizeof want[0]; c++) {
        variant_t w = base();
        switch (c) {
        case 0:
            w.nvec[0] = 3;
            w.nvec[1] = 4;
            break;
        case 1:
            w.name = "y";
            break;
        case 2:
            w.dtype = RO_DTYPE_UINT8;
            break;
        case 3:
            w.ndim = 2;
            break;
        case 4:
            w.width = 8;
            break;
        case 5: /* MultiBinary(2) has the head of MultiDiscrete([2, 2]) */
            w.nvec[0] = w.nvec[1] = 2;
            w.second = RO_SPACE_MULTI_BINARY;
            break;
        case 6:
            w.mask = false;
            break;
        case 7:
            w.box = false;
            break;
        }
        /* case 5: a file of MultiDiscrete([2, 2]), whose head MultiBinary(2) shares */
        ro_space_layout_t other;
        if (c == 5) {
            variant_t md = base();
            md.nvec[0] = md.nvec[1] = 2;
            ro_space_layout_t l2;
            make_layout(&l2, &md);
            ro_policy_t *p2 = build(&l2, NULL, 3);
            assert_int_equal(ro__policy_save(p2, tmp_path("md.pb"), err, sizeof err), 0);
            ro__policy_free(p2);
            ro__layout_free(&l2);
        }
        make_layout(&other, &w);
        load_fails(&other, c == 5 ? tmp_path("md.pb") : path, RO_EINVAL, want[c]);
        ro__layout_free(&other);
    }
    ro__policy_free(p);
    ro__layout_free(&lay);
}

/* A format-1 file (an ABI 1 policy) loads where it fits, is refused for a
 * composite action; a composite file is refused by an ABI 1 policy. */
static void test_format1_and_abi1(void **state)
{
    (void)state;
    ro_space_t ob = obs_box(6), ac = act_discrete(3);
    ro_policy_spec_t s = mlp_spec(8, 0, RO_ACT_RELU, 4);
    ro_policy_t *p = new_policy(&s, &ob, &ac);
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_save(p, tmp_path("v1.pb"), err, sizeof err), 0);
    ro_policy_params_t pp;
    assert_int_equal(ro__policy_params_read(&pp, tmp_path("v1.pb"), err, sizeof err), 0);
    assert_null(pp.layout);
    assert_false(pp.composite);
    ro__policy_params_free(&pp);
    ro__policy_free(p);

    variant_t v = base();
    ro_space_layout_t lay;
    make_layout(&lay, &v);
    load_fails(&lay, tmp_path("v1.pb"), RO_EINVAL, "one plain head (format 1)");
    ro_policy_t *c = build(&lay, NULL, 3);
    assert_int_equal(ro__policy_save(c, tmp_path("c.pb"), err, sizeof err), 0);
    ro__policy_free(c);
    ro__layout_free(&lay);

    ro_space_t ob15 = obs_box(6), ac15 = act_discrete(15);
    s.params_path = tmp_path("c.pb");
    p = NULL;
    assert_int_equal(ro__policy_new(&p, &s, &ob15, &ac15, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "action_kind is \"composite\""));
}

/* Typed tensors with one Discrete: the file is format 2 with the layout
 * (not composite), reloads to the same head, and a format-1 file of the
 * same width still loads (it is what older builds wrote). */
static void test_typed_inputs_plain_head(void **state)
{
    (void)state;
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.num_agents = 1;
    sp.num_obs = 1;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "px", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {3, 4}};
    sp.num_parts = 1;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    ro_space_layout_t lay, f32;
    char err[ERRLEN] = "";
    assert_int_equal(ro__layout_from_spaces(&lay, &sp, "u8", err, sizeof err), 0);
    sp.obs[0].dtype = RO_DTYPE_FLOAT32;
    assert_int_equal(ro__layout_from_spaces(&f32, &sp, "f", err, sizeof err), 0);
    ro_policy_t *p = build(&lay, NULL, 8);
    assert_int_equal(ro__policy_save(p, tmp_path("u8.pb"), err, sizeof err), 0);
    ro_policy_params_t pp;
    assert_int_equal(ro__policy_params_read(&pp, tmp_path("u8.pb"), err, sizeof err), 0);
    assert_non_null(pp.layout);
    assert_false(pp.composite);
    ro__policy_params_free(&pp);
    ro_policy_t *q = build(&lay, tmp_path("u8.pb"), 1);
    int32_t ai[2][ROWS];
    float lp[2][ROWS];
    act(p, 9, ai[0], NULL, lp[0]);
    act(q, 9, ai[1], NULL, lp[1]);
    assert_memory_equal(ai[0], ai[1], sizeof ai[0]);
    assert_memory_equal(lp[0], lp[1], sizeof lp[0]);
    load_fails(&f32, tmp_path("u8.pb"), RO_EINVAL,
               "input 0 ('px') is uint8 but the env's is float32");
    /* a format-1 file of that width: the ABI 1 policy over 12 floats */
    ro_space_t ob = obs_box(12), ac = act_discrete(3);
    ro_policy_spec_t s = mlp_spec(16, 8, RO_ACT_TANH, 8);
    ro_policy_t *r = new_policy(&s, &ob, &ac);
    assert_int_equal(ro__policy_save(r, tmp_path("old.pb"), err, sizeof err), 0);
    ro_policy_t *o = build(&lay, tmp_path("old.pb"), 1);
    ro__policy_free(o);
    ro__policy_free(r);
    ro__policy_free(p);
    ro__policy_free(q);
    ro__layout_free(&lay);
    ro__layout_free(&f32);
}

/* file_bytes reads a whole small file. */
static uint8_t *file_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *b = malloc(1 << 16);
    *len = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

/* mutated decodes the composite file, lets change edit it, re-encodes it
 * (length-delimited) and decodes that; returns decode's code, error in err. */
static int mutated(void (*change)(Rollout__V1__PolicyParams *), char *err)
{
    size_t len;
    uint8_t *b = file_bytes(tmp_path("m.pb"), &len);
    Rollout__V1__PolicyParams *m;
    ro_pb_alloc_t a;
    assert_int_equal(ro__policy_params_unpack(&m, &a, b, len, "m", err, ERRLEN), 0);
    Rollout__V1__PolicyLayout *keep = m->layout;
    change(m);
    size_t n = rollout__v1__policy_params__get_packed_size(m), h = ro__varint_size(n);
    uint8_t *o = malloc(h + n);
    ro__varint_put(o, n);
    rollout__v1__policy_params__pack(m, o + h);
    m->layout = keep;
    rollout__v1__policy_params__free_unpacked(m, &a.base);
    ro_policy_params_t pp;
    int rc = ro__policy_params_decode(&pp, o, h + n, "policy file m.pb", err, ERRLEN);
    if (rc == 0)
        ro__policy_params_free(&pp);
    free(o);
    free(b);
    return rc;
}

static void newer(Rollout__V1__PolicyParams *m)
{
    m->format_version = 4;
}
static void no_layout(Rollout__V1__PolicyParams *m)
{
    m->layout = NULL; /* mutated puts it back before freeing */
}
static void v1_composite(Rollout__V1__PolicyParams *m)
{
    m->format_version = 1;
    m->layout = NULL;
}
static void bad_head_kind(Rollout__V1__PolicyParams *m)
{
    strcpy(m->layout->heads[1]->kind, "poisson"); /* in place: shorter */
}
static void head_too_wide(Rollout__V1__PolicyParams *m)
{
    m->layout->heads[1]->width = 20;
}
static void gaussian_on_discrete(Rollout__V1__PolicyParams *m)
{
    strcpy(m->layout->heads[0]->kind, "gaussian");
}
static void fewer_log_std(Rollout__V1__PolicyParams *m)
{
    m->log_std->shape[0] = 1;
    m->log_std->n_data = 1;
}
static void input_short(Rollout__V1__PolicyParams *m)
{
    m->layout->inputs[0]->shape[0] = 5;
}
static void bad_divisor(Rollout__V1__PolicyParams *m)
{
    m->layout->inputs[0]->divide_by = 2.0f;
}
static void bad_part(Rollout__V1__PolicyParams *m)
{
    strcpy(m->layout->parts[1], "multi_trinary");
}
static void too_many_heads(Rollout__V1__PolicyParams *m)
{
    m->layout->heads[1]->part = 7;
}

/* Newer versions, missing or malformed layouts: refused by number or name. */
static void test_malformed_refused(void **state)
{
    (void)state;
    variant_t v = base();
    ro_space_layout_t lay;
    make_layout(&lay, &v);
    ro_policy_t *p = build(&lay, NULL, 3);
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_save(p, tmp_path("m.pb"), err, sizeof err), 0);
    static const struct {
        void (*change)(Rollout__V1__PolicyParams *);
        const char *want;
    } cases[] = {
        {newer, "format_version is 4; this reader knows format_version 1 to 3"},
        {no_layout, "format_version is 2 but layout is missing"},
        {v1_composite, "\"composite\" is format_version 2"},
        {bad_head_kind, "layout.heads[1].kind is not categorical or gaussian"},
        {head_too_wide, "layout.heads[1] (offset 6, width 20) does not follow"},
        {gaussian_on_discrete, "layout.heads[0] is gaussian but part 0 is discrete"},
        {fewer_log_std, "log_std has 1 values but layout.heads has 2 Gaussian heads"},
        {input_short, "layout.inputs cover 5 floats but obs_dim is 6"},
        {bad_divisor, "layout.inputs[0].divide_by is 2"},
        {bad_part, "layout.parts[1] is not discrete"},
        {too_many_heads, "layout.heads[1].part is 7"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(mutated(cases[c].change, err), RO_EBADMSG);
        if (!strstr(err, cases[c].want))
            fail_msg("case %zu: \"%s\" does not say \"%s\"", c, err, cases[c].want);
    }
    ro__policy_free(p);
    ro__layout_free(&lay);
}

/* Every truncation of a composite file and every flipped byte of its
 * layout is refused or decodes into something the checks accept: never a
 * crash, and a cut file never loads. */
static void test_truncated_and_corrupt(void **state)
{
    (void)state;
    variant_t v = base();
    ro_space_layout_t lay;
    make_layout(&lay, &v);
    ro_policy_t *p = build(&lay, NULL, 3);
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_save(p, tmp_path("t.pb"), err, sizeof err), 0);
    size_t len;
    uint8_t *b = file_bytes(tmp_path("t.pb"), &len);
    ro_policy_params_t pp;
    uint64_t msglen;
    const size_t h = (size_t)ro__varint_get(b, len, &msglen);
    uint8_t *c = malloc(len);
    for (size_t cut = 0; cut < len; cut++) { /* cut as it is: the prefix says more */
        assert_int_equal(ro__policy_params_decode(&pp, b, cut, "cut", err, sizeof err), RO_EBADMSG);
    }
    for (size_t cut = 0; cut < msglen; cut++) { /* cut with its prefix fixed */
        size_t k = ro__varint_put(c, cut);
        memcpy(c + k, b + h, cut);
        assert_int_equal(ro__policy_params_decode(&pp, c, k + cut, "cut", err, sizeof err),
                         RO_EBADMSG);
    }
    free(c);
    assert_int_equal(ro__policy_params_decode(&pp, b, len, "whole", err, sizeof err), 0);
    const size_t lay_len = pp.layout_len;
    ro__policy_params_free(&pp);
    /* the layout is the last field: flip each of its bytes */
    for (size_t i = len - lay_len; i < len; i++) {
        b[i] ^= 0x5a;
        if (ro__policy_params_decode(&pp, b, len, "flip", err, sizeof err) == 0) {
            /* a flip the validation accepts must still be checked against the env */
            int rc =
                ro__policy_layout_check(ro__policy_params_view(&pp), &lay, "flip", err, sizeof err);
            assert_true(rc == 0 || rc == RO_EINVAL);
            ro__policy_params_free(&pp);
        }
        b[i] ^= 0x5a;
    }
    free(b);
    ro__policy_free(p);
    ro__layout_free(&lay);
}

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("params_composite");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_composite_round_trip),
        cmocka_unit_test(test_composite_refusals_name_the_field),
        cmocka_unit_test(test_format1_and_abi1),
        cmocka_unit_test(test_typed_inputs_plain_head),
        cmocka_unit_test(test_malformed_refused),
        cmocka_unit_test(test_truncated_and_corrupt),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
