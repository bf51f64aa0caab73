/*
 * Encode and decode throughput of Observations frames (the node's side of
 * every batch sent to a remote learner, and the learner's), for a few batch
 * and observation sizes, in one run.
 *
 * usage: bench_wire [--seconds S] [--help]
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/clock.h"
#include "runtime/flags.h"
#include "wire/frame.h"

static void fill(Rollout__V1__Observations *o, uint32_t n, uint32_t od)
{
    o->seq = 1;
    o->n_env = o->n_step = o->n_reward = o->n_terminated = o->n_truncated = o->n_episode_start = n;
    o->env = calloc(n, sizeof *o->env);
    o->step = calloc(n, sizeof *o->step);
    o->reward = calloc(n, sizeof *o->reward);
    o->terminated = calloc(n, sizeof *o->terminated);
    o->truncated = calloc(n, sizeof *o->truncated);
    o->episode_start = calloc(n, sizeof *o->episode_start);
    o->n_obs = (size_t)n * od;
    o->obs = calloc(o->n_obs, sizeof *o->obs);
    for (uint32_t i = 0; i < n; i++) {
        o->env[i] = i;
        o->step[i] = 1000 + i;
        o->reward[i] = 1.0f;
    }
    for (size_t i = 0; i < o->n_obs; i++)
        o->obs[i] = (float)i * 0.001f;
}

static void release(Rollout__V1__Observations *o)
{
    free(o->env);
    free(o->step);
    free(o->reward);
    free(o->terminated);
    free(o->truncated);
    free(o->episode_start);
    free(o->obs);
}

typedef struct wire_opts {
    double seconds;
    bool help;
} wire_opts_t;

static const ro_flag_t wire_flags[] = {
    {RO_FLAG_SECONDS, "seconds", "S", offsetof(wire_opts_t, seconds), 10,
     .help = "each measurement (default 1)"},
    {RO_FLAG_BOOL, "help", NULL, offsetof(wire_opts_t, help), .help = "this text"},
};

int main(int argc, char **argv)
{
    wire_opts_t o = {.seconds = 1.0};
    const size_t nflags = sizeof wire_flags / sizeof wire_flags[0];
    char err[256];
    if (ro__flags_parse(wire_flags, nflags, &o, NULL, argc, argv, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_wire: %s\n", err);
        return 2;
    }
    if (o.help) {
        ro__flags_usage(stdout,
                        "usage: bench_wire [--seconds S]\n\nEncode and decode throughput of "
                        "Observations frames.\n\n",
                        wire_flags, nflags);
        return 0;
    }
    double seconds = o.seconds;
    const uint32_t shapes[][2] = {{128, 4}, {1024, 4}, {128, 64}, {64, 1024}};
    printf("| envs per frame | obs floats | frame bytes | encode frames/s | decode frames/s | "
           "encode ns/env | decode ns/env | decode MB/s |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        uint32_t n = shapes[k][0], od = shapes[k][1];
        Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
        fill(&o, n, od);
        ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
        f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
        f.observations = &o;

        uint64_t enc = 0, t0 = ro__now_ns(), end = t0 + (uint64_t)(seconds * 1e9), now = t0;
        uint8_t *buf = NULL;
        size_t len = 0;
        while (now < end) {
            for (int i = 0; i < 64; i++, enc++) {
                free(buf);
                ro__frame_encode(&f, &buf, &len);
            }
            now = ro__now_ns();
        }
        double enc_s = (double)(now - t0) * 1e-9;

        ro_frame_reader_t rd;
        ro_pb_alloc_t alloc;
        ro__pb_alloc_init(&alloc, (size_t)4 << 30);
        ro__frame_reader_init(&rd, 1u << 30, &alloc);
        uint64_t dec = 0;
        t0 = now = ro__now_ns();
        end = t0 + (uint64_t)(seconds * 1e9);
        char err[128];
        while (now < end) {
            for (int i = 0; i < 64; i++, dec++) {
                ro_frame_t *g;
                ro__frame_reader_feed(&rd, buf, len);
                if (ro__frame_reader_next(&rd, &g, err, sizeof err) != 1) {
                    fprintf(stderr, "decode failed: %s\n", err);
                    return 1;
                }
                ro__frame_free(&alloc, g);
            }
            now = ro__now_ns();
        }
        double dec_s = (double)(now - t0) * 1e-9;
        printf("| %u | %u | %zu | %.0f | %.0f | %.1f | %.1f | %.0f |\n", n, od, len, enc / enc_s,
               dec / dec_s, enc_s * 1e9 / ((double)enc * n), dec_s * 1e9 / ((double)dec * n),
               (double)dec * (double)len / dec_s / 1e6);
        ro__frame_reader_free(&rd);
        free(buf);
        release(&o);
    }
    return 0;
}
