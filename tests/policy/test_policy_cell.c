/* Tests of the recurrent cells (src/policy/policy_cell.c, kernel_cell.h):
 * GRU and LSTM policies against a reference in double over several steps,
 * the same bits on every instruction set and in every batch, the state
 * zeroed at an episode start, weights files (format 3) and their checks,
 * and --recurrent. tests/policy/test_cell_torch.py compares the cells with
 * torch.nn.GRUCell and LSTMCell. */
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
#include "policy/policy_flags.h"
#include "policy_fixture.h"
#include "runtime/error.h"

#define OBS 5
#define NACT 3
#define ROWS 70 /* two blocks */
#define STEPS 6
#define H 24 /* not a multiple of the vector width */
#define MAXS (2 * H)

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("policy_cell");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

static ro_policy_spec_t cell_spec(ro_cell_t cell, ro_kernel_path_t path)
{
    ro_policy_spec_t s = mlp_spec(16, 12, RO_ACT_TANH, 77);
    s.cell = cell;
    s.cell_hidden = H;
    s.kernels = path;
    return s;
}

static double sig(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

/* ref_step runs one row through pp in double: torso, cell (state h, c
 * updated in place), head into out. */
static void ref_step(const ro_policy_params_t *pp, const float *x, double *h, double *c,
                     double *out)
{
    double a[2][64], g[2][4 * H];
    for (uint32_t k = 0; k < pp->obs_dim; k++)
        a[0][k] = x[k];
    int cur = 0;
    for (uint32_t l = 0; l < pp->nlayers; l++) {
        const ro_policy_layer_t *L = &pp->layers[l];
        const size_t rows = ro__policy_layer_rows(L);
        for (size_t j = 0; j < rows; j++) {
            double s = L->bias[j];
            for (uint32_t k = 0; k < L->in; k++)
                s += (double)L->weight[j * L->in + k] * a[cur][k];
            g[0][j] = s;
            if (L->cell) {
                double t = L->bias_hh[j];
                for (uint32_t k = 0; k < L->out; k++)
                    t += (double)L->weight_hh[j * L->out + k] * h[k];
                g[1][j] = t;
            }
        }
        for (uint32_t j = 0; j < L->out; j++) {
            double y;
            if (L->cell == RO_CELL_GRU) {
                const double r = sig(g[0][j] + g[1][j]), z = sig(g[0][H + j] + g[1][H + j]);
                const double n = tanh(g[0][2 * H + j] + r * g[1][2 * H + j]);
                y = (1 - z) * n + z * h[j];
            } else if (L->cell == RO_CELL_LSTM) {
                const double i = sig(g[0][j] + g[1][j]), f = sig(g[0][H + j] + g[1][H + j]);
                const double u = tanh(g[0][2 * H + j] + g[1][2 * H + j]);
                const double o = sig(g[0][3 * H + j] + g[1][3 * H + j]);
                c[j] = f * c[j] + i * u;
                y = o * tanh(c[j]);
            } else {
                y = l + 1 == pp->nlayers ? g[0][j] : tanh(g[0][j]);
            }
            a[!cur][j] = y;
        }
        if (L->cell)
            for (uint32_t j = 0; j < L->out; j++)
                h[j] = a[!cur][j];
        cur = !cur;
    }
    for (uint32_t j = 0; j < pp->action_dim; j++)
        out[j] = a[cur][j];
}

/* first_at: row r starts an episode at step t (some rows mid-run). */
static uint8_t first_at(uint32_t r, uint32_t t)
{
    return t == 0 || (r % 7 == 3 && t == 3) || (r % 11 == 5 && t == 4);
}

/* run_steps runs STEPS steps of ROWS rows through p, batch rows at a time,
 * keeping each row's state; outputs [STEPS][ROWS][NACT], states after. */
static void run_steps(const ro_policy_t *p, uint32_t batch, float *outs, float *states)
{
    const uint32_t sf = ro__policy_state_floats(p);
    ro_policy_ws_t *ws = NULL;
    assert_int_equal(ro__policy_ws_new(&ws, p, batch), 0);
    memset(states, 0xff, (size_t)ROWS * sf * sizeof(float)); /* NaN: step 0 must zero them */
    float *rows[ROWS];
    uint8_t first[ROWS];
    for (uint32_t t = 0; t < STEPS; t++) {
        float x[ROWS * OBS];
        fill_inputs(x, ROWS * OBS, 900 + t);
        for (uint32_t r = 0; r < ROWS; r++) {
            rows[r] = states + (size_t)r * sf;
            first[r] = first_at(r, t);
        }
        for (uint32_t r0 = 0; r0 < ROWS; r0 += batch) {
            const uint32_t n = ROWS - r0 < batch ? ROWS - r0 : batch;
            memcpy(ro__policy_ws_input(ws), x + (size_t)r0 * OBS, (size_t)n * OBS * sizeof(float));
            const ro_policy_carry_t c = {.state = rows + r0, .first = first + r0};
            ro__policy_forward(p, ws, n, outs + ((size_t)t * ROWS + r0) * NACT, &c);
        }
    }
    ro__policy_ws_free(ws);
}

static void check_reference(ro_cell_t cell)
{
    ro_space_t obs = obs_box(OBS), act = act_discrete(NACT);
    ro_policy_spec_t spec = cell_spec(cell, RO_KERNELS_AUTO);
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    assert_int_equal(ro__policy_state_floats(p), cell == RO_CELL_LSTM ? 2 * H : H);
    static float outs[STEPS * ROWS * NACT], states[ROWS * MAXS];
    run_steps(p, 64, outs, states);

    char err[ERRLEN] = "";
    ro_policy_params_t pp;
    assert_int_equal(ro__policy_save(p, tmp_path("ref.pb"), err, sizeof err), 0);
    assert_int_equal(ro__policy_params_load(&pp, tmp_path("ref.pb"), &obs, &act, err, sizeof err),
                     0);
    assert_int_equal(pp.layers[2].cell, cell);
    double worst = 0.0;
    for (uint32_t r = 0; r < ROWS; r++) {
        double h[H] = {0}, c[H] = {0}, out[NACT];
        for (uint32_t t = 0; t < STEPS; t++) {
            float x[ROWS * OBS];
            fill_inputs(x, ROWS * OBS, 900 + t);
            if (first_at(r, t)) {
                memset(h, 0, sizeof h);
                memset(c, 0, sizeof c);
            }
            ref_step(&pp, x + (size_t)r * OBS, h, c, out);
            for (uint32_t j = 0; j < NACT; j++) {
                double d = fabs(out[j] - outs[((size_t)t * ROWS + r) * NACT + j]);
                worst = d > worst ? d : worst;
            }
        }
        for (uint32_t k = 0; k < H; k++) { /* the state kept is the reference's */
            double d = fabs(h[k] - states[(size_t)r * ro__policy_state_floats(p) + k]);
            worst = d > worst ? d : worst;
        }
    }
    print_message("%s: largest difference from the double reference %.3g\n",
                  cell == RO_CELL_GRU ? "gru" : "lstm", worst);
    assert_true(worst < 1e-5);
    ro__policy_params_free(&pp);
    ro__policy_free(p);
}

static void test_gru_reference(void **state)
{
    (void)state;
    check_reference(RO_CELL_GRU);
}

static void test_lstm_reference(void **state)
{
    (void)state;
    check_reference(RO_CELL_LSTM);
}

/* Every instruction set, and every batch size, gives the same bits. */
static void test_same_bits(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(OBS), act = act_discrete(NACT);
    static float want[STEPS * ROWS * NACT], got[STEPS * ROWS * NACT];
    static float wst[ROWS * MAXS], gst[ROWS * MAXS];
    for (ro_cell_t cell = RO_CELL_GRU; cell <= RO_CELL_LSTM; cell++) {
        ro_policy_spec_t spec = cell_spec(cell, RO_KERNELS_SCALAR);
        ro_policy_t *ref = new_policy(&spec, &obs, &act);
        run_steps(ref, 1, want, wst); /* one row at a time, portable C */
        const size_t sb = (size_t)ROWS * ro__policy_state_floats(ref) * sizeof(float);
        const ro_kernel_path_t paths[] = {RO_KERNELS_SCALAR, RO_KERNELS_AVX2, RO_KERNELS_AVX512};
        const uint32_t batches[] = {ROWS, 64, 13};
        for (size_t i = 0; i < 3; i++) {
            if (!ro__kernels(paths[i])) {
                print_message("cell: this CPU does not run the %s path\n",
                              ro__kernels_path_name(paths[i]));
                continue;
            }
            spec.kernels = paths[i];
            ro_policy_t *p = new_policy(&spec, &obs, &act);
            for (size_t b = 0; b < 3; b++) {
                run_steps(p, batches[b], got, gst);
                assert_memory_equal(got, want, sizeof want);
                assert_memory_equal(gst, wst, sb);
            }
            ro__policy_free(p);
        }
        ro__policy_free(ref);
    }
}

/* A row that starts an episode sees a zero state whatever its carry holds,
 * and no carry at all is a zero state too. */
static void test_first_zeroes(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(OBS), act = act_discrete(NACT);
    ro_policy_spec_t spec = cell_spec(RO_CELL_LSTM, RO_KERNELS_AUTO);
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    ro_policy_ws_t *ws = NULL;
    assert_int_equal(ro__policy_ws_new(&ws, p, 2), 0);
    float x[2 * OBS], stale[MAXS], zero[MAXS] = {0}, o1[2 * NACT], o2[2 * NACT], o3[2 * NACT];
    fill_inputs(x, OBS, 5);
    memcpy(x + OBS, x, OBS * sizeof(float)); /* two rows, one observation */
    fill_inputs(stale, MAXS, 6);
    float s0[MAXS], s1[MAXS];
    memcpy(s0, stale, sizeof s0);
    memcpy(s1, zero, sizeof s1);
    float *rows[2] = {s0, s1};
    const uint8_t first[2] = {1, 0};
    memcpy(ro__policy_ws_input(ws), x, sizeof x);
    ro__policy_forward(p, ws, 2, o1, &(ro_policy_carry_t){.state = rows, .first = first});
    memcpy(ro__policy_ws_input(ws), x, sizeof x);
    ro__policy_forward(p, ws, 2, o2, NULL);
    assert_memory_equal(o1, o2, sizeof o1);
    assert_memory_equal(s0, s1, sizeof s0); /* both rows went from zeros to one state */
    /* Without the flag the stale state is used: another output. */
    memcpy(s0, stale, sizeof s0);
    memcpy(ro__policy_ws_input(ws), x, sizeof x);
    ro__policy_forward(p, ws, 1, o3, &(ro_policy_carry_t){.state = rows, .first = NULL});
    assert_memory_not_equal(o3, o1, NACT * sizeof(float));
    ro__policy_ws_free(ws);
    ro__policy_free(p);
}

/* A saved recurrent policy loads (format 3) and acts the same; an MLP's
 * file stays format 1. */
static void test_file_roundtrip(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(OBS), act = act_discrete(NACT);
    ro_policy_spec_t spec = cell_spec(RO_CELL_GRU, RO_KERNELS_AUTO);
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    char err[ERRLEN] = "", d[128];
    assert_int_equal(ro__policy_save(p, tmp_path("gru.pb"), err, sizeof err), 0);
    ro_policy_spec_t fs = {.kind = RO_POLICY_MLP, .params_path = tmp_path("gru.pb")};
    ro_policy_t *q = new_policy(&fs, &obs, &act);
    ro__policy_describe(q, d, sizeof d);
    assert_non_null(strstr(d, "16,12,gru:24,tanh"));
    static float a[STEPS * ROWS * NACT], b[STEPS * ROWS * NACT], sa[ROWS * MAXS], sb[ROWS * MAXS];
    run_steps(p, 64, a, sa);
    run_steps(q, 64, b, sb);
    assert_memory_equal(a, b, sizeof a);

    uint8_t *buf;
    size_t len;
    ro_policy_params_t pp;
    assert_int_equal(ro__policy_params_read(&pp, tmp_path("gru.pb"), err, sizeof err), 0);
    assert_int_equal(ro__policy_params_encode(&pp, &buf, &len), 0);
    size_t k = buf[0] & 0x80 ? (buf[1] & 0x80 ? 3 : 2) : 1; /* the length prefix */
    Rollout__V1__PolicyParams *m = rollout__v1__policy_params__unpack(NULL, len - k, buf + k);
    assert_non_null(m);
    assert_int_equal(m->format_version, 3);
    assert_string_equal(m->layers[2]->kind, "gru");
    rollout__v1__policy_params__free_unpacked(m, NULL);
    free(buf);
    ro__policy_params_free(&pp);

    ro_policy_spec_t ms = mlp_spec(16, 12, RO_ACT_TANH, 77);
    ro_policy_t *mlp = new_policy(&ms, &obs, &act);
    assert_int_equal(ro__policy_save(mlp, tmp_path("mlp.pb"), err, sizeof err), 0);
    assert_int_equal(ro__policy_params_read(&pp, tmp_path("mlp.pb"), err, sizeof err), 0);
    assert_int_equal(ro__policy_params_encode(&pp, &buf, &len), 0);
    m = rollout__v1__policy_params__unpack(NULL, len - 1 - (buf[0] >> 7), buf + 1 + (buf[0] >> 7));
    assert_non_null(m);
    assert_int_equal(m->format_version, 1);
    assert_int_equal(ro__policy_state_floats(mlp), 0);
    rollout__v1__policy_params__free_unpacked(m, NULL);
    free(buf);
    ro__policy_params_free(&pp);
    ro__policy_free(mlp);
    ro__policy_free(q);
    ro__policy_free(p);
}

/* decode_bad mutates a GRU policy's message and expects decode to refuse it
 * with a message holding want. */
static void decode_bad(void (*mutate)(Rollout__V1__PolicyParams *), const char *want)
{
    ro_space_t obs = obs_box(OBS), act = act_discrete(NACT);
    ro_policy_spec_t spec = cell_spec(RO_CELL_GRU, RO_KERNELS_AUTO);
    ro_policy_t *p = new_policy(&spec, &obs, &act);
    char err[ERRLEN] = "";
    ro_policy_params_t pp;
    assert_int_equal(ro__policy_save(p, tmp_path("m.pb"), err, sizeof err), 0);
    assert_int_equal(ro__policy_params_read(&pp, tmp_path("m.pb"), err, sizeof err), 0);
    uint8_t *buf, out[1 << 16];
    size_t len;
    assert_int_equal(ro__policy_params_encode(&pp, &buf, &len), 0);
    size_t k = buf[0] & 0x80 ? (buf[1] & 0x80 ? 3 : 2) : 1;
    Rollout__V1__PolicyParams *m = rollout__v1__policy_params__unpack(NULL, len - k, buf + k);
    assert_non_null(m);
    char *kinds[RO_POLICY_MAX_HIDDEN + 1];
    for (size_t l = 0; l < m->n_layers; l++)
        kinds[l] = m->layers[l]->kind;
    const uint32_t hh1 = m->layers[2]->weight_hh->shape[1];
    mutate(m);
    size_t n = rollout__v1__policy_params__get_packed_size(m);
    assert_true(n + 3 < sizeof out);
    size_t h = 0;
    for (uint64_t v = n; v >= 0x80; v >>= 7)
        out[h++] = (uint8_t)(v | 0x80);
    out[h] = (uint8_t)(n >> (7 * h));
    h++;
    rollout__v1__policy_params__pack(m, out + h);
    ro_policy_params_t bad;
    int rc = ro__policy_params_decode(&bad, out, h + n, "file x", err, sizeof err);
    if (rc != RO_EBADMSG || !strstr(err, want))
        fail_msg("expected an error holding '%s'; got %d '%s'", want, rc, err);
    /* Back to what unpack allocated, then freed. */
    for (size_t l = 0; l < m->n_layers; l++)
        m->layers[l]->kind = kinds[l];
    m->layers[2]->weight_hh->shape[1] = hh1;
    rollout__v1__policy_params__free_unpacked(m, NULL);
    free(buf);
    ro__policy_params_free(&pp);
    ro__policy_free(p);
}

static char no_kind[] = "", rnn[] = "rnn", gru[] = "gru";
static void set_format1(Rollout__V1__PolicyParams *m)
{
    m->format_version = 1;
}
static void set_kind_rnn(Rollout__V1__PolicyParams *m)
{
    m->layers[2]->kind = rnn;
}
static void cell_first(Rollout__V1__PolicyParams *m)
{
    m->layers[2]->kind = no_kind;
    m->layers[0]->kind = gru;
}
static void drop_weight_hh(Rollout__V1__PolicyParams *m)
{
    m->layers[2]->weight_hh->shape[1] = 7;
}
static void no_cell_format3(Rollout__V1__PolicyParams *m)
{
    m->layers[2]->kind = no_kind;
}

static void test_bad_files(void **state)
{
    (void)state;
    decode_bad(set_format1, "recurrent layers are format 3");
    decode_bad(set_kind_rnn, "expected \"gru\", \"lstm\" or none");
    decode_bad(cell_first, "the cell must be the layer before the head");
    decode_bad(drop_weight_hh, "weight_hh must have shape [72,24]");
    decode_bad(no_cell_format3, "has weight_hh or bias_hh but no kind");
}

/* --recurrent: gru:H and lstm:H, H in 1..512; refused with --policy random. */
static void test_flag(void **state)
{
    (void)state;
    ro_policy_spec_t s = {.kind = RO_POLICY_MLP};
    char err[ERRLEN];
    assert_int_equal(ro__flag_recurrent(&s, "gru:128", err, sizeof err), 0);
    assert_int_equal(s.cell, RO_CELL_GRU);
    assert_int_equal(s.cell_hidden, 128);
    assert_int_equal(ro__flag_recurrent(&s, "lstm:512", err, sizeof err), 0);
    assert_int_equal(s.cell, RO_CELL_LSTM);
    const char *bad[] = {"gru", "gru:", "gru:0", "gru:513", "rnn:8", ":8", "gru:8x", "lstm8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(ro__flag_recurrent(&s, bad[i], err, sizeof err), RO_EINVAL);
        assert_non_null(strstr(err, "--recurrent"));
    }
    s.kind = RO_POLICY_RANDOM;
    assert_int_equal(ro__policy_flags_check(&s, false, false, false, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "--recurrent"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gru_reference),  cmocka_unit_test(test_lstm_reference),
        cmocka_unit_test(test_same_bits),      cmocka_unit_test(test_first_zeroes),
        cmocka_unit_test(test_file_roundtrip), cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_flag),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
