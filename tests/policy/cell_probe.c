/*
 * cell_probe: runs a weights file's policy over T steps of N rows, keeping
 * each row's recurrent state, and writes the head's raw outputs, for
 * tests/integration/test_python_cell_torch.py to compare with torch.
 *
 *   cell_probe WEIGHTS T N < [T][N][obs_dim] float32, then [T][N] uint8 is_first
 *   > [T][N][head outputs] float32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/params.h"
#include "policy/policy.h"

int main(int argc, char **argv)
{
    char err[512] = "";
    if (argc != 4) {
        fprintf(stderr, "usage: cell_probe WEIGHTS T N\n");
        return 2;
    }
    const uint32_t T = (uint32_t)atoi(argv[2]), N = (uint32_t)atoi(argv[3]);
    ro_policy_params_t pp;
    if (T == 0 || N == 0 || ro__policy_params_read(&pp, argv[1], err, sizeof err) < 0) {
        fprintf(stderr, "cell_probe: %s\n", err[0] ? err : "bad T or N");
        return 1;
    }
    const uint32_t od = pp.obs_dim, nout = pp.action_dim;
    ro__policy_params_free(&pp);
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {od}};
    ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = nout};
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .params_path = argv[1]};
    ro_policy_t *p = NULL;
    ro_policy_ws_t *ws = NULL;
    if (ro__policy_new(&p, &spec, &obs, &act, err, sizeof err) < 0 ||
        ro__policy_ws_new(&ws, p, N) < 0) {
        fprintf(stderr, "cell_probe: %s\n", err);
        return 1;
    }
    const uint32_t sf = ro__policy_state_floats(p);
    float *x = malloc(sizeof(float) * T * N * od), *out = malloc(sizeof(float) * N * nout);
    uint8_t *first = malloc((size_t)T * N);
    float *st = calloc((size_t)N * (sf ? sf : 1), sizeof(float));
    float **rows = malloc(sizeof(float *) * N);
    if (!x || !out || !first || !st || !rows ||
        fread(x, sizeof(float), (size_t)T * N * od, stdin) != (size_t)T * N * od ||
        fread(first, 1, (size_t)T * N, stdin) != (size_t)T * N) {
        fprintf(stderr, "cell_probe: short input\n");
        return 1;
    }
    for (uint32_t r = 0; r < N; r++)
        rows[r] = st + (size_t)r * sf;
    for (uint32_t t = 0; t < T; t++) {
        memcpy(ro__policy_ws_input(ws), x + (size_t)t * N * od, sizeof(float) * N * od);
        const ro_policy_carry_t c = {.state = rows, .first = first + (size_t)t * N};
        ro__policy_forward(p, ws, N, out, &c);
        fwrite(out, sizeof(float), (size_t)N * nout, stdout);
    }
    free(x);
    free(out);
    free(first);
    free(st);
    free(rows);
    ro__policy_ws_free(ws);
    ro__policy_free(p);
    return 0;
}
