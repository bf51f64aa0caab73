/*
 * libFuzzer entry point for the trajectory file reader (-Dfuzz=true, clang).
 *
 *     CC=clang meson setup build-fuzz -Dfuzz=true -Db_lundef=false
 *     meson compile -C build-fuzz fuzz_trajectory_reader
 *     build-fuzz/tests/fuzz/fuzz_trajectory_reader -max_total_time=60 CORPUS/
 *
 * Seed the corpus with a few small files written by rollout-node --record.
 * Each input is read twice, resynchronising and stopping at the first
 * damage; every batch the reader returns must satisfy its validation.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "trajectory/reader.h"

static void read_all(const uint8_t *data, size_t size, bool resync)
{
    ro_traj_reader_t r;
    char err[256];
    if (ro__traj_reader_open(&r, data, size, resync, err, sizeof err) != 0)
        return;
    Rollout__V1__TransitionBatch *b;
    ro_traj_event_t ev;
    while ((ev = ro__traj_reader_next(&r, &b)) != RO_TRAJ_EOF) {
        if (ev != RO_TRAJ_BATCH)
            continue;
        if (ro__traj_validate_batch(r.hdr, b, err, sizeof err) != 0)
            abort(); /* the reader let an invalid batch through */
        for (size_t k = 0; k < b->n_env; k++)
            if (b->env[k] >= r.hdr->num_envs)
                abort();
        ro__traj_batch_free(&r, b);
    }
    ro__traj_reader_close(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_all(data, size, true);
    read_all(data, size, false);
    return 0;
}
