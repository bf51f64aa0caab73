/*
 * libFuzzer entry point for snapshots (-Dfuzz=true, clang): a trajectory
 * file of format version 3 whose snapshot index, footer and env states are
 * the fuzzer's. The index is loaded (src/trajectory/snapshot_index.c);
 * every entry it gives is sought and read as a record; every snapshot of
 * every record reached is checked and loaded (envs/env_state.c) into a
 * cartpole and a burn (obs_dim 3) instance, as rollout-replay --from does. Nothing may
 * crash, leak or read out of bounds; an index the loader accepts must name
 * envs of the header and offsets inside the file.
 *
 *     CC=clang meson setup build-fuzz -Dfuzz=true -Db_lundef=false
 *     meson compile -C build-fuzz tests/fuzz/fuzz_snapshot
 *     build-fuzz/tests/fuzz/fuzz_snapshot -max_total_time=60 CORPUS/
 *
 * Seed the corpus with small recordings made with --snapshot-every.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "envs/env_state.h"
#include "envs/registry.h"
#include "trajectory/reader.h"
#include "trajectory/snapshot_index.h"

/* Loads every snapshot of b into both envs (most are refused: the bytes
 * are the fuzzer's). */
static void load_all(const Rollout__V1__TransitionBatch *b, const ro_env_kind_t *kinds,
                     void *const *envs)
{
    char err[256];
    for (size_t i = 0; i < b->n_snapshots; i++) {
        const ProtobufCBinaryData *s = &b->snapshots[i]->state;
        ro_env_state_info_t info;
        /* The blob's own params: a blob of the right env and size reaches
         * the env's load_state(), whose own checks are fuzzed too. */
        uint64_t params =
            ro__env_state_peek(s->data, s->len, &info, err, sizeof err) == 0 ? info.params : 0;
        for (int k = 0; k < 2; k++)
            (void)ro__env_state_load(&kinds[k], envs[k], params, s->data, s->len, NULL, err,
                                     sizeof err);
    }
}

/* A skim filter: records of even envs are needed. */
static bool even_env(void *ctx, uint64_t record, uint32_t env)
{
    (void)ctx, (void)record;
    return env % 2 == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ro_traj_reader_t r;
    char err[256];
    if (ro__traj_reader_open(&r, data, size, true, err, sizeof err) != 0)
        return 0;
    ro_env_kind_t kinds[2] = {{.vt = &ro__env_cartpole, .state = ro__cartpole_state},
                              {.vt = &ro__env_burn, .state = ro__burn_state}};
    const ro_env_arg_t args[] = {{"cost_us", "0"}, {"obs_dim", "3"}};
    void *envs[2] = {NULL, NULL};
    if (ro__env_cartpole.create(&envs[0], NULL, 0, 1, err, sizeof err) != 0 ||
        ro__env_burn.create(&envs[1], args, 2, 1, err, sizeof err) != 0)
        abort();
    ro_traj_index_t ix;
    if (ro__traj_index_load(&r, &ix, err, sizeof err) == 0) {
        for (size_t k = 0; k < ix.n; k++) {
            if (ix.env[k] >= r.hdr->num_envs || ix.offset[k] >= size)
                abort(); /* the loader let a bad entry through */
            Rollout__V1__TransitionBatch *b;
            ro__traj_reader_seek(&r, (size_t)ix.offset[k], ix.record[k]);
            if (ro__traj_reader_next(&r, &b) == RO_TRAJ_BATCH) {
                load_all(b, kinds, envs);
                ro__traj_batch_free(&r, b);
            }
        }
        ro__traj_index_free(&ix);
    }
    /* And every record from the start, as a full read meets them; odd
     * envs are not needed, so the skim path (--from's) runs too. */
    ro__traj_reader_close(&r);
    if (ro__traj_reader_open(&r, data, size, true, err, sizeof err) == 0) {
        ro__traj_reader_skim(&r, even_env, NULL);
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev;
        while ((ev = ro__traj_reader_next(&r, &b)) != RO_TRAJ_EOF)
            if (ev == RO_TRAJ_BATCH) {
                load_all(b, kinds, envs);
                ro__traj_batch_free(&r, b);
            }
        ro__traj_reader_close(&r);
    }
    ro__env_cartpole.destroy(envs[0]);
    ro__env_burn.destroy(envs[1]);
    return 0;
}
