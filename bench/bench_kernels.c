/*
 * The policy's kernels on one thread, in one run: the forward pass of the
 * CartPole network (4 -> 64 -> 64 -> 2) per row, for every kernel path
 * this CPU runs, with relu and with tanh, next to OpenBLAS's sgemm forward
 * of the same network with relu (bench_blas.h); and the forward pass with
 * sampling (ro__policy_act), discrete and Gaussian. Every figure is a
 * median of `repeats` samples taken in turn, so the ratios (tanh / relu,
 * OpenBLAS / ours) come from interleaved measurements. Time is the
 * thread's own CPU time (CLOCK_THREAD_CPUTIME_ID): on a shared machine the
 * time other processes hold the CPU is not counted, so the figures hold
 * under load (their caches still share the L3: ext_load says how busy).
 *
 * usage: bench_kernels [--seconds S] [--repeats N] [--csv FILE]
 *                      [--quiet-wait S] [--help]
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_blas.h"
#include "bench_util.h"
#include "policy/policy.h"
#include "runtime/thread_guard.h"

enum { OP_FWD_RELU, OP_FWD_TANH, OP_ACT_TANH, OP_ACT_BOX, OP_BLAS, NOPS };
/* CSV fields: no commas. */
static const char *const op_names[NOPS] = {"forward relu", "forward tanh",
                                           "forward+sample tanh (2 actions)",
                                           "forward+sample tanh (box 2)", "OpenBLAS forward relu"};

typedef struct sut {
    ro_policy_t *p;
    ro_policy_ws_t *ws;
    ro_rng_t *rng, **rows;
    int32_t *ai;
    float *af;
} sut_t;

static void sut_open(sut_t *t, ro_kernel_path_t path, ro_activation_t act, bool box, uint32_t B)
{
    static const float lo[2] = {-2, -2}, hi[2] = {2, 2};
    const ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {4}};
    const ro_space_t disc = {.kind = RO_SPACE_DISCRETE, .n = 2};
    const ro_space_t cont = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = lo, .high = hi};
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP,
                             .hidden = {64, 64},
                             .nhidden = 2,
                             .activation = act,
                             .seed = 1,
                             .kernels = path};
    char err[256];
    if (ro__policy_new(&t->p, &spec, &obs, box ? &cont : &disc, err, sizeof err)) {
        fprintf(stderr, "bench_kernels: %s\n", err);
        exit(1);
    }
    ro__policy_ws_new(&t->ws, t->p, B);
    ro_rng_t in;
    ro__rng_init(&in, 9);
    for (size_t i = 0; i < (size_t)B * 4; i++)
        ro__policy_ws_input(t->ws)[i] = (float)ro__rng_uniform(&in, -2.0, 2.0);
    t->rng = calloc(B, sizeof *t->rng);
    t->rows = calloc(B, sizeof *t->rows);
    for (uint32_t i = 0; i < B; i++) {
        ro__rng_init(&t->rng[i], i);
        t->rows[i] = &t->rng[i];
    }
    t->ai = calloc(B, sizeof *t->ai);
    t->af = calloc((size_t)B * 2, sizeof *t->af);
}

static void sut_close(sut_t *t)
{
    ro__policy_ws_free(t->ws);
    ro__policy_free(t->p);
    free(t->rng);
    free(t->rows);
    free(t->ai);
    free(t->af);
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns_per_row runs op over B rows for `seconds` of this thread's CPU time;
 * returns CPU ns per row. */
static double ns_per_row(int op, ro_kernel_path_t path, uint32_t B, double seconds)
{
    sut_t t = {0};
    blas_net_t net = {0};
    float *x = NULL, *out = calloc((size_t)B * 2, sizeof(float));
    if (op == OP_BLAS) {
        blas_net_init(&net, 4, 2, B);
        x = calloc((size_t)B * 4, sizeof(float));
        for (size_t i = 0; i < (size_t)B * 4; i++)
            x[i] = (float)((i * 7919) % 400) / 100.0f - 2.0f;
    } else {
        sut_open(&t, path, op == OP_FWD_RELU ? RO_ACT_RELU : RO_ACT_TANH, op == OP_ACT_BOX, B);
    }
    uint64_t rows = 0, t0 = cpu_ns(), end = t0 + (uint64_t)(seconds * 1e9), now = t0;
    while (now < end) {
        for (int r = 0; r < 32; r++) {
            if (op == OP_BLAS)
                blas_forward(&net, x, B, t.ai ? t.ai : (int32_t *)out);
            else if (op == OP_FWD_RELU || op == OP_FWD_TANH)
                ro__policy_forward(t.p, t.ws, B, out, NULL);
            else
                ro__policy_act(t.p, t.ws, B, t.rows, t.ai, t.af, NULL, NULL);
            rows += B;
        }
        now = cpu_ns();
    }
    if (op == OP_BLAS) {
        blas_net_free(&net);
        free(x);
    } else {
        sut_close(&t);
    }
    free(out);
    return (double)(now - t0) / (double)rows;
}

typedef struct kernels_opts {
    double seconds, quiet_wait;
    uint32_t repeats;
    const char *csv;
    bool help;
} kernels_opts_t;

#define AT(field) offsetof(kernels_opts_t, field)
static const ro_flag_t kernels_flags[] = {
    {RO_FLAG_SECONDS, "seconds", "S", AT(seconds), 10,
     .help = "CPU time of each sample (default 0.3; the scalar\npath a quarter of it)"},
    {RO_FLAG_U32, "repeats", "N", AT(repeats), 1, BENCH_MAX_REPEATS,
     .help = "samples of each figure, in turn; medians (default 5)"},
    {RO_FLAG_STRING, "csv", "FILE", AT(csv), .help = "also write the table as CSV"},
    {RO_FLAG_SECONDS, "quiet-wait", "S", AT(quiet_wait), 0, .help = BENCH_QUIET_WAIT_HELP},
    {RO_FLAG_BOOL, "help", NULL, AT(help), .help = "this text"},
};

int main(int argc, char **argv)
{
    ro__threads_single_blas(argv);
    kernels_opts_t o = {.seconds = 0.3, .repeats = 5, .quiet_wait = bench_quiet_wait_s};
    bench_parse("bench_kernels",
                "usage: bench_kernels [options]\n\nThe policy's forward pass per row on every "
                "kernel path this CPU\nruns, relu and tanh, with sampling, against OpenBLAS's "
                "sgemm, in\nthe thread's CPU time (docs/benchmarks.md).\n\n",
                kernels_flags, sizeof kernels_flags / sizeof kernels_flags[0], &o, &o.help, argc,
                argv, NULL);
    bench_quiet_wait_s = o.quiet_wait;
    const double seconds = o.seconds;
    const int repeats = (int)o.repeats;
    const char *csv = o.csv;
    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (csv && !out) {
        fprintf(stderr, "bench_kernels: cannot write %s\n", csv);
        return 1;
    }
    if (out)
        fprintf(out, "path,batch,op,ns_per_row,ext_load\n");
    printf("| path | batch | relu ns/row | tanh ns/row | tanh / relu | tanh + sampling (2 actions) "
           "| tanh + Gaussian (2 dims) | OpenBLAS relu ns/row | OpenBLAS / ours (relu) |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    const uint32_t batches[] = {64, 256};
    for (int p = RO_KERNELS_AVX512; p >= RO_KERNELS_SCALAR; p--) {
        const ro_kernel_path_t path = (ro_kernel_path_t)p;
        if (!ro__kernels(path))
            continue;
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
            const uint32_t B = batches[b];
            /* The scalar path is the portable reference, slow by design:
             * shorter samples. */
            const double secs = path == RO_KERNELS_SCALAR ? seconds / 4 : seconds;
            double v[NOPS][BENCH_MAX_REPEATS], load = 0;
            for (int r = 0; r < repeats; r++)
                for (int op = 0; op < NOPS; op++) {
                    bench_load_t mark;
                    bench_load_mark(&mark);
                    v[op][r] = ns_per_row(op, path, B, secs);
                    load += bench_load_others(&mark) / (NOPS * repeats);
                }
            double m[NOPS];
            for (int op = 0; op < NOPS; op++) {
                m[op] = bench_median(v[op], repeats);
                if (out)
                    fprintf(out, "%s,%u,%s,%.2f,%.3f\n", ro__kernels_path_name(path), B,
                            op_names[op], m[op], load);
            }
            printf("| %s | %u | %.1f | %.1f | %.3f | %.1f | %.1f | %.1f | %.2f |\n",
                   ro__kernels_path_name(path), B, m[OP_FWD_RELU], m[OP_FWD_TANH],
                   m[OP_FWD_TANH] / m[OP_FWD_RELU], m[OP_ACT_TANH], m[OP_ACT_BOX], m[OP_BLAS],
                   m[OP_BLAS] / m[OP_FWD_RELU]);
            fflush(stdout);
        }
    }
    if (out)
        fclose(out);
    return 0;
}
