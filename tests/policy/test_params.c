/*
 * Decoding the weights file (src/policy/params.c): files built here byte by
 * byte with a small protobuf writer of our own (independent of protobuf-c,
 * so it also checks that we read the standard encoding) load exactly, every
 * validation failure is named, then a deterministic mini-fuzz. Saving and
 * files on disk: test_params_files.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/params.h"
#include "policy_fixture.h"
#include "runtime/error.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("params");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

/* ---- a minimal protobuf writer ---- */

typedef struct wbuf {
    uint8_t *b;
    size_t len;
    size_t cap;
} wbuf_t;

static void put(wbuf_t *w, const void *p, size_t n)
{
    if (w->len + n > w->cap) {
        w->cap = (w->len + n) * 2 + 64;
        w->b = realloc(w->b, w->cap);
        assert_non_null(w->b);
    }
    if (n)
        memcpy(w->b + w->len, p, n);
    w->len += n;
}

static void put_varint(wbuf_t *w, uint64_t v)
{
    do {
        uint8_t byte = (uint8_t)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
        put(w, &byte, 1);
        v >>= 7;
    } while (v);
}

/* Wire types: 0 varint, 2 length-delimited. */
static void put_uint(wbuf_t *w, uint32_t field, uint64_t v)
{
    put_varint(w, (uint64_t)field << 3 | 0);
    put_varint(w, v);
}

static void put_bytes(wbuf_t *w, uint32_t field, const void *p, size_t n)
{
    put_varint(w, (uint64_t)field << 3 | 2);
    put_varint(w, n);
    put(w, p, n);
}

static void put_tensor(wbuf_t *w, uint32_t field, const uint32_t *shape, size_t nshape,
                       const float *data, size_t ndata)
{
    wbuf_t t = {0}, s = {0};
    for (size_t i = 0; i < nshape; i++)
        put_varint(&s, shape[i]);
    if (nshape)
        put_bytes(&t, 1, s.b, s.len);
    if (ndata)
        put_bytes(&t, 2, data, ndata * sizeof(float)); /* packed floats, little-endian */
    put_bytes(w, field, t.b, t.len);
    free(t.b);
    free(s.b);
}

/* ---- a model to encode, with every field under the test's control ---- */

#define MAXL 12

typedef struct tensor {
    int present;
    uint32_t shape[4];
    size_t nshape;
    float *data;
    size_t ndata;
} tensor_t;

typedef struct model {
    uint32_t format_version;
    const char *activation;
    uint32_t obs_dim;
    const char *action_kind;
    uint32_t action_dim;
    uint32_t nlayers;
    tensor_t weight[MAXL];
    tensor_t bias[MAXL];
    tensor_t log_std;
    uint64_t version;
    float store[4096]; /* backing for data */
} model_t;

static void encode_message(const model_t *m, wbuf_t *out)
{
    put_uint(out, 1, m->format_version);
    put_bytes(out, 2, m->activation, strlen(m->activation));
    put_uint(out, 3, m->obs_dim);
    put_bytes(out, 4, m->action_kind, strlen(m->action_kind));
    put_uint(out, 5, m->action_dim);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        wbuf_t L = {0};
        const tensor_t *w = &m->weight[l], *b = &m->bias[l];
        if (w->present)
            put_tensor(&L, 1, w->shape, w->nshape, w->data, w->ndata);
        if (b->present)
            put_tensor(&L, 2, b->shape, b->nshape, b->data, b->ndata);
        put_bytes(out, 6, L.b, L.len);
        free(L.b);
    }
    if (m->log_std.present)
        put_tensor(out, 7, m->log_std.shape, m->log_std.nshape, m->log_std.data, m->log_std.ndata);
    if (m->version)
        put_uint(out, 8, m->version);
}

/* encode_file frames the message: varint byte count, then the message. */
static void encode_file(const model_t *m, wbuf_t *out)
{
    wbuf_t msg = {0};
    encode_message(m, &msg);
    put_varint(out, msg.len);
    put(out, msg.b, msg.len);
    free(msg.b);
}

/*
 * valid_model: obs 4 -> 8 -> 6 -> head (3 logits, or 2 means and log_std),
 * tanh; the values are distinct so a misplaced copy shows.
 */
static void valid_model(model_t *m, int box)
{
    memset(m, 0, sizeof *m);
    m->format_version = 1;
    m->activation = "tanh";
    m->obs_dim = 4;
    m->action_kind = box ? "box" : "discrete";
    m->action_dim = box ? 2 : 3;
    m->nlayers = 3;
    m->version = 17;
    const uint32_t dims[4] = {4, 8, 6, m->action_dim};
    float *s = m->store;
    for (uint32_t l = 0; l < 3; l++) {
        tensor_t *w = &m->weight[l], *b = &m->bias[l];
        *w = (tensor_t){.present = 1,
                        .shape = {dims[l + 1], dims[l]},
                        .nshape = 2,
                        .data = s,
                        .ndata = (size_t)dims[l + 1] * dims[l]};
        for (size_t i = 0; i < w->ndata; i++)
            s[i] = (float)((int)(i * 7 + l * 3) % 11 - 5) / 8.0f;
        s += w->ndata;
        *b = (tensor_t){
            .present = 1, .shape = {dims[l + 1]}, .nshape = 1, .data = s, .ndata = dims[l + 1]};
        for (size_t i = 0; i < b->ndata; i++)
            s[i] = 0.01f * (float)(i + 1) * (l % 2 ? -1.0f : 1.0f);
        s += b->ndata;
    }
    if (box) {
        m->log_std = (tensor_t){.present = 1, .shape = {2}, .nshape = 1, .data = s, .ndata = 2};
        s[0] = -0.5f;
        s[1] = 0.25f;
    }
}

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n)
        assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static const float lo2[2] = {-1.0f, -1.0f}, hi2[2] = {1.0f, 1.0f};

/* act_for: the test model's action space, 3 discrete actions or a box of 2. */
static ro_space_t act_for(int box)
{
    return box ? act_box(2, lo2, hi2) : act_discrete(3);
}

static void test_hand_encoded_file_loads(void **state)
{
    (void)state;
    for (int box = 0; box < 2; box++) {
        model_t m;
        valid_model(&m, box);
        wbuf_t f = {0};
        encode_file(&m, &f);
        const char *path = tmp_path("hand.pb");
        write_bytes(path, f.b, f.len);
        free(f.b);
        ro_space_t obs = obs_box(4), act = act_for(box);
        ro_policy_params_t pp;
        char err[ERRLEN] = "";
        int rc = ro__policy_params_load(&pp, path, &obs, &act, err, sizeof err);
        if (rc)
            fail_msg("%s", err);
        assert_int_equal(pp.activation, RO_ACT_TANH);
        assert_int_equal(pp.obs_dim, 4);
        assert_int_equal(pp.action_kind, box ? RO_SPACE_BOX : RO_SPACE_DISCRETE);
        assert_int_equal(pp.action_dim, m.action_dim);
        assert_int_equal(pp.nlayers, 3);
        assert_int_equal(pp.version, 17);
        for (uint32_t l = 0; l < 3; l++) {
            assert_int_equal(pp.layers[l].out, m.weight[l].shape[0]);
            assert_int_equal(pp.layers[l].in, m.weight[l].shape[1]);
            assert_memory_equal(pp.layers[l].weight, m.weight[l].data,
                                m.weight[l].ndata * sizeof(float));
            assert_memory_equal(pp.layers[l].bias, m.bias[l].data, m.bias[l].ndata * 4);
        }
        if (box)
            assert_memory_equal(pp.log_std, m.log_std.data, 2 * sizeof(float));
        else
            assert_null(pp.log_std);
        ro__policy_params_free(&pp);
    }
}

/* ---- malformed files ---- */

/* expect_load_error loads bytes written to bad.pb and checks the code and
 * that the message names the file and mentions needle. */
static void expect_load_error_env(const uint8_t *b, size_t n, int box, uint32_t env_obs, int code,
                                  const char *needle)
{
    const char *path = tmp_path("bad.pb");
    write_bytes(path, b, n);
    ro_space_t obs = obs_box(env_obs), act = act_for(box);
    ro_policy_params_t pp;
    char err[ERRLEN] = "";
    int rc = ro__policy_params_load(&pp, path, &obs, &act, err, sizeof err);
    if (rc != code || !strstr(err, needle))
        fail_msg("expected %d mentioning \"%s\"; got %d \"%s\"", code, needle, rc, err);
    char prefix[160];
    snprintf(prefix, sizeof prefix, "policy file %s: ", path);
    if (strncmp(err, prefix, strlen(prefix)) != 0)
        fail_msg("message does not name the file: \"%s\"", err);
    /* The same through ro__policy_new. */
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .params_path = path};
    ro_policy_t *p = (ro_policy_t *)1;
    char err2[ERRLEN] = "";
    assert_int_equal(ro__policy_new(&p, &spec, &obs, &act, err2, sizeof err2), code);
    assert_null(p);
    assert_string_equal(err, err2);
}

static void expect_load_error(const uint8_t *b, size_t n, int box, int code, const char *needle)
{
    expect_load_error_env(b, n, box, 4, code, needle);
}

/* expect_model_error encodes m and expects the load to fail. */
static void expect_model_error(const model_t *m, int box, int code, const char *needle)
{
    wbuf_t f = {0};
    encode_file(m, &f);
    expect_load_error(f.b, f.len, box, code, needle);
    free(f.b);
}

static void test_framing_errors(void **state)
{
    (void)state;
    model_t m;
    valid_model(&m, 0);
    wbuf_t f = {0};
    encode_file(&m, &f);

    expect_load_error(f.b, 0, 0, RO_EBADMSG, "file is empty");
    expect_load_error(f.b, f.len - 10, 0, RO_EBADMSG, "truncated");
    expect_load_error(f.b, 1, 0, RO_EBADMSG, "truncated inside the length prefix");
    expect_load_error(f.b, 2, 0, RO_EBADMSG, "truncated: the length prefix says");
    const uint8_t cont[2] = {0x80, 0x80};
    expect_load_error(cont, 2, 0, RO_EBADMSG, "truncated inside the length prefix");

    wbuf_t junk = {0};
    put(&junk, f.b, f.len);
    put(&junk, "xyz", 3);
    expect_load_error(junk.b, junk.len, 0, RO_EBADMSG, "3 bytes of trailing data");
    free(junk.b);

    /* Ten bytes that all say "more follows" (the tenth within 64 bits). */
    uint8_t longv[16];
    memset(longv, 0x80, sizeof longv);
    longv[9] = 0x81;
    expect_load_error(longv, sizeof longv, 0, RO_EBADMSG, "longer than 10 bytes");
    uint8_t ovf[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0};
    expect_load_error(ovf, sizeof ovf, 0, RO_EBADMSG, "overflows 64 bits");
    uint8_t huge[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    expect_load_error(huge, sizeof huge, 0, RO_EBADMSG, "truncated: the length prefix says");

    /* Garbage message bodies: invalid wire types, a length running past
     * the end, a field tag of 0. */
    const uint8_t g1[] = {5, 0x0f, 0xff, 0xff, 0xff, 0xff};
    expect_load_error(g1, sizeof g1, 0, RO_EBADMSG, "protobuf decoding failed");
    const uint8_t g2[] = {3, 0x12, 0x7f, 'a'};
    expect_load_error(g2, sizeof g2, 0, RO_EBADMSG, "protobuf decoding failed");
    const uint8_t g3[] = {2, 0x00, 0x01};
    expect_load_error(g3, sizeof g3, 0, RO_EBADMSG, "protobuf decoding failed");
    const char *text = "\x1fthis is not a protobuf message!";
    expect_load_error((const uint8_t *)text, strlen(text), 0, RO_EBADMSG, "PolicyParams");

    /* An empty message decodes, and then has no version. */
    const uint8_t empty[1] = {0};
    expect_load_error(empty, 1, 0, RO_EBADMSG, "format_version is 0");
    free(f.b);
}

static void test_field_errors(void **state)
{
    (void)state;
    model_t m;
    valid_model(&m, 0);
    m.format_version = 2;
    expect_model_error(&m, 0, RO_EBADMSG, "format_version is 2");
    valid_model(&m, 0);
    m.activation = "gelu";
    expect_model_error(&m, 0, RO_EBADMSG, "activation is \"gelu\"");
    valid_model(&m, 0);
    m.activation = "";
    expect_model_error(&m, 0, RO_EBADMSG, "activation is \"\"");
    valid_model(&m, 0);
    m.action_kind = "multi\x01";
    expect_model_error(&m, 0, RO_EBADMSG, "action_kind is \"multi?\"");
    valid_model(&m, 0);
    m.obs_dim = 0;
    expect_model_error(&m, 0, RO_EBADMSG, "obs_dim is 0");
    valid_model(&m, 0);
    m.action_dim = 0;
    expect_model_error(&m, 0, RO_EBADMSG, "action_dim is 0");
    valid_model(&m, 0);
    m.nlayers = 0;
    expect_model_error(&m, 0, RO_EBADMSG, "has 0 layers");
    valid_model(&m, 0);
    m.nlayers = RO_POLICY_MAX_HIDDEN + 2;
    expect_model_error(&m, 0, RO_EBADMSG, "has 10 layers");

    /* Shapes and data. */
    valid_model(&m, 0);
    m.weight[1].ndata--;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[1].weight has shape [6,8] (48 values) but 47");
    valid_model(&m, 0);
    m.weight[1].shape[1] = 7;
    m.weight[1].ndata = 42;
    expect_model_error(&m, 0, RO_EBADMSG,
                       "layers[1].weight has shape [6,7] but layers[0] outputs 8");
    valid_model(&m, 0);
    m.weight[0].shape[1] = 2;
    m.weight[0].ndata = 16;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[0].weight has shape [8,2] but obs_dim is 4");
    valid_model(&m, 0);
    m.action_dim = 4;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[2] (the head) outputs 3 but action_dim is 4");
    valid_model(&m, 0);
    m.weight[2].nshape = 3;
    m.weight[2].shape[2] = 1;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[2].weight has 3 dimensions");
    valid_model(&m, 0);
    m.weight[0].shape[0] = 0;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[0].weight has shape [0,4]");
    valid_model(&m, 0);
    m.weight[1].present = 0;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[1].weight is missing");
    valid_model(&m, 0);
    m.bias[2].present = 0;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[2].bias is missing");
    valid_model(&m, 0);
    m.bias[0].shape[0] = 7;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[0].bias must have shape [8]");
    valid_model(&m, 0);
    m.bias[0].ndata = 7;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[0].bias has shape [8] but 7 data values");
    valid_model(&m, 0);
    m.log_std = (tensor_t){.present = 1, .shape = {3}, .nshape = 1, .data = m.store, .ndata = 3};
    expect_model_error(&m, 0, RO_EBADMSG, "log_std is set but action_kind is \"discrete\"");
    valid_model(&m, 1);
    m.log_std.present = 0;
    expect_model_error(&m, 1, RO_EBADMSG, "log_std is missing");
    valid_model(&m, 1);
    m.log_std.shape[0] = 3;
    expect_model_error(&m, 1, RO_EBADMSG, "log_std must have shape [2]");
    valid_model(&m, 1);
    m.log_std.ndata = 1;
    expect_model_error(&m, 1, RO_EBADMSG, "log_std has shape [2] but 1 data values");

    /* Values. */
    valid_model(&m, 0);
    m.weight[1].data[5] = NAN;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[1].weight[5] is nan");
    valid_model(&m, 0);
    m.bias[0].data[2] = -INFINITY;
    expect_model_error(&m, 0, RO_EBADMSG, "layers[0].bias[2] is -inf");
    valid_model(&m, 1);
    m.log_std.data[1] = INFINITY;
    expect_model_error(&m, 1, RO_EBADMSG, "log_std[1] is inf");
}

static void test_env_mismatch(void **state)
{
    (void)state;
    model_t m;
    valid_model(&m, 0);
    wbuf_t f = {0};
    encode_file(&m, &f);
    expect_load_error_env(f.b, f.len, 0, 5, RO_EINVAL,
                          "obs_dim is 4 but the env's observations have 5 floats");
    /* A discrete file against a box env, and the reverse. */
    expect_load_error(f.b, f.len, 1, RO_EINVAL,
                      "action_kind is \"discrete\" but the env's actions are a box");
    free(f.b);
    f = (wbuf_t){0};
    valid_model(&m, 1);
    encode_file(&m, &f);
    expect_load_error(f.b, f.len, 0, RO_EINVAL,
                      "action_kind is \"box\" but the env's actions are discrete");
    free(f.b);
    /* The number of actions. */
    f = (wbuf_t){0};
    valid_model(&m, 0);
    m.action_dim = 2;
    m.weight[2].shape[0] = 2;
    m.weight[2].ndata = 12;
    m.bias[2].shape[0] = 2;
    m.bias[2].ndata = 2;
    encode_file(&m, &f);
    expect_load_error(f.b, f.len, 0, RO_EINVAL, "action_dim is 2 but the env has 3");
    free(f.b);
}

/* ---- mini-fuzz ---- */

/* mutate applies one of several corruptions to a copy of src. */
static size_t mutate(const uint8_t *src, size_t n, uint8_t *dst, ro_rng_t *rng)
{
    memcpy(dst, src, n);
    size_t len = n;
    const uint64_t kind = ro__rng_next(rng) % 6;
    const int flips = 1 + (int)(ro__rng_next(rng) % 4);
    switch (kind) {
    case 0: /* flip a few bytes */
    case 1:
        for (int i = 0; i < flips; i++)
            dst[ro__rng_next(rng) % len] ^= (uint8_t)(1 + ro__rng_next(rng) % 255);
        break;
    case 2: /* truncate */
        len = ro__rng_next(rng) % n;
        break;
    case 3: /* flip, then fix the length prefix so the body is parsed */
        for (int i = 0; i < flips; i++)
            dst[2 + ro__rng_next(rng) % (len - 2)] ^= (uint8_t)(1 << (ro__rng_next(rng) % 8));
        break;
    case 4: /* a random byte in a random place, then truncation or not */
        dst[ro__rng_next(rng) % len] = (uint8_t)ro__rng_next(rng);
        if (ro__rng_next(rng) & 1)
            len -= ro__rng_next(rng) % (len / 4);
        break;
    default: /* overwrite a run with random bytes */
    {
        size_t at = ro__rng_next(rng) % len, run = 1 + ro__rng_next(rng) % 16;
        for (size_t i = at; i < len && i < at + run; i++)
            dst[i] = (uint8_t)ro__rng_next(rng);
        break;
    }
    }
    return len;
}

static void check_fuzz_result(int rc, const char *err, const ro_policy_params_t *pp)
{
    (void)pp;
    if (rc == 0)
        return;
    assert_true(rc == RO_EBADMSG || rc == RO_EINVAL || rc == RO_ENOMEM);
    assert_true(strlen(err) > 0);
    assert_int_equal(strncmp(err, "policy file ", 12), 0);
}

static void test_fuzz(void **state)
{
    (void)state;
    model_t m;
    valid_model(&m, 1);
    wbuf_t f = {0};
    encode_file(&m, &f);
    /* The 2-byte length prefix stays for case 3 to corrupt the body only. */
    assert_true(f.len >= 128 && f.len < 16384);
    uint8_t *buf = malloc(f.len);
    ro_rng_t rng;
    ro__rng_init(&rng, 2024);
    ro_space_t obs = obs_box(4), act = act_for(1);
    const char *path = tmp_path("fuzz.pb");
    int ok = 0;
    for (int it = 0; it < 2000; it++) {
        size_t len = mutate(f.b, f.len, buf, &rng);
        write_bytes(path, buf, len);
        /* Through the whole policy: a file that loads is also run. */
        ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .params_path = path};
        ro_policy_t *p = NULL;
        char err[ERRLEN] = "";
        int rc = ro__policy_new(&p, &spec, &obs, &act, err, sizeof err);
        check_fuzz_result(rc, err, NULL);
        if (rc == 0) {
            ok++;
            ro_policy_ws_t *ws;
            assert_int_equal(ro__policy_ws_new(&ws, p, 3), 0);
            for (int i = 0; i < 12; i++)
                ro__policy_ws_input(ws)[i] = (float)i - 6.0f;
            float out[6];
            ro__policy_forward(p, ws, 3, out, NULL);
            ro__policy_ws_free(ws);
            ro__policy_free(p);
        }
    }
    /* And many more in memory, straight into the decoder. */
    for (int it = 0; it < 20000; it++) {
        size_t len = mutate(f.b, f.len, buf, &rng);
        ro_policy_params_t pp;
        char err[ERRLEN] = "";
        int rc = ro__policy_params_decode(&pp, buf, len, "policy file fuzz", err, sizeof err);
        check_fuzz_result(rc, err, &pp);
        if (rc == 0) {
            ok++;
            ro__policy_params_free(&pp);
        }
    }
    print_message("fuzz: %d of 22000 corrupted files still loaded (the rest failed cleanly)\n", ok);
    free(buf);
    free(f.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_encoded_file_loads),
        cmocka_unit_test(test_framing_errors),
        cmocka_unit_test(test_field_errors),
        cmocka_unit_test(test_env_mismatch),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
