/*
 * Loading weights files of 64 MiB (docs/benchmarks.md#hardening): the time
 * ro__policy_params_load takes and the peak RSS it adds (VmHWM, reset
 * through /proc/self/clear_refs before each load), for
 *   - a file of empty layers after a valid header (refused),
 *   - a valid file of 64 MiB of weights (4096 x 4096 and a 3-action head),
 *   - the same file with its last weight NaN (refused after reading it all).
 * Targets: under 1 s and under 100 MB for any file of at most 64 MiB.
 *
 * usage: bench_policy_load [--dir DIR] [--repeats N]
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy/params.h"

static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0)
            kib = strtol(line + n, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_empty_layers(const char *path, size_t body)
{
    static const uint8_t head[] = {0x08, 1,   0x12, 4,   't', 'a', 'n', 'h', 0x18, 4,    0x22,
                                   8,    'd', 'i',  's', 'c', 'r', 'e', 't', 'e',  0x28, 3};
    FILE *f = fopen(path, "wb");
    if (!f)
        exit(2);
    uint64_t v = sizeof head + body;
    while (v >= 0x80) {
        fputc((int)(v | 0x80) & 0xff, f);
        v >>= 7;
    }
    fputc((int)v, f);
    fwrite(head, 1, sizeof head, f);
    static uint8_t chunk[1 << 16];
    for (size_t i = 0; i < sizeof chunk; i += 2) {
        chunk[i] = (6 << 3) | 2;
        chunk[i + 1] = 0;
    }
    for (size_t done = 0; done < body; done += sizeof chunk)
        fwrite(chunk, 1, body - done < sizeof chunk ? body - done : sizeof chunk, f);
    fclose(f);
}

static void write_weights(const char *path, bool nan_last)
{
    ro_policy_params_t p;
    memset(&p, 0, sizeof p);
    p.activation = RO_ACT_TANH;
    p.obs_dim = 4096;
    p.action_kind = RO_SPACE_DISCRETE;
    p.action_dim = 3;
    p.nlayers = 2;
    p.layers[0] = (ro_policy_layer_t){.in = 4096, .out = 4096};
    p.layers[1] = (ro_policy_layer_t){.in = 4096, .out = 3};
    if (ro__policy_params_alloc(&p) != 0)
        exit(2);
    size_t n = (size_t)4096 * 4096 + 4096 + 4096 * 3 + 3;
    float *w = p.layers[0].weight;
    for (size_t i = 0; i < n; i++)
        w[i] = (float)(i % 997) * 1e-3f;
    if (nan_last)
        p.layers[1].bias[2] = NAN;
    char err[512];
    if (ro__policy_params_save(&p, path, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(2);
    }
    ro__policy_params_free(&p);
}

static void measure(const char *what, const char *path, int repeats)
{
    const float lo[1] = {0}, hi[1] = {0};
    (void)lo, (void)hi;
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {4096}};
    ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = 3};
    double worst_s = 0;
    long worst_kib = 0;
    char err[512] = "";
    int rc = 0;
    for (int r = 0; r < repeats; r++) {
        bool peak = reset_peak();
        long before = status_kib(peak ? "VmHWM:" : "VmRSS:");
        ro_policy_params_t pp;
        double t0 = now_s();
        rc = ro__policy_params_load(&pp, path, &obs, &act, err, sizeof err);
        double dt = now_s() - t0;
        long grown = status_kib("VmHWM:") - before;
        if (rc == 0)
            ro__policy_params_free(&pp);
        if (dt > worst_s)
            worst_s = dt;
        if (grown > worst_kib)
            worst_kib = grown;
    }
    printf("%-38s %8.3f s %10ld KiB  %s\n", what, worst_s, worst_kib,
           rc == 0 ? "loaded" : err + (strstr(err, ": ") ? strstr(err, ": ") - err + 2 : 0));
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    int repeats = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--repeats") == 0)
            repeats = atoi(argv[i + 1]);
    }
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s/bench_empty_layers.pb", dir);
    snprintf(b, sizeof b, "%s/bench_weights.pb", dir);
    snprintf(c, sizeof c, "%s/bench_weights_nan.pb", dir);
    write_empty_layers(a, 64u << 20);
    write_weights(b, false);
    write_weights(c, true);
    printf("%-38s %10s %14s\n", "file (64 MiB)", "worst time", "peak RSS added");
    measure("empty layers after a valid header", a, repeats);
    measure("valid weights, 4096x4096 + head", b, repeats);
    measure("the same, its last value NaN", c, repeats);
    unlink(a);
    unlink(b);
    unlink(c);
    return 0;
}
