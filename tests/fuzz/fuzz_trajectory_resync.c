/*
 * libFuzzer entry point for resynchronising after damage (-Dfuzz=true,
 * clang). Each input damages a valid trajectory file made at start-up: the
 * first four bytes pick where, the fifth how (overwrite or insert), the rest
 * is the damage. The reader, resynchronising, must return only valid
 * batches, in increasing record order, each at most once, and spend a
 * bounded amount of CRC work: every call of ro__crc32c is counted through
 * -Wl,--wrap (a quadratic resync fails here, not only slowly).
 *
 *     build-fuzz/tests/fuzz/fuzz_trajectory_resync -max_len=1048576 -rss_limit_mb=2048 CORPUS/
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trajectory/crc32c.h"
#include "trajectory/format.h"
#include "trajectory/reader.h"

#define BATCHES 400
#define ENVS 4
#define OBS 3

static uint64_t crc_bytes;

uint32_t __real_ro__crc32c(uint32_t crc, const void *data, size_t len);
uint32_t __wrap_ro__crc32c(uint32_t crc, const void *data, size_t len)
{
    crc_bytes += len;
    return __real_ro__crc32c(crc, data, len);
}

static uint8_t *file;
static size_t file_len;

static size_t put(uint8_t *out, const ProtobufCMessage *m)
{
    return ro__traj_frame(out, m);
}

/* A header and BATCHES small batches, as the recorder writes them. */
static void make_file(void)
{
    file = malloc(1u << 20);
    if (!file)
        abort();
    memcpy(file, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN);
    size_t off = RO_TRAJ_MAGIC_LEN;
    Rollout__V1__TrajectoryHeader h = ROLLOUT__V1__TRAJECTORY_HEADER__INIT;
    h.magic = RO_TRAJ_HEADER_MAGIC;
    h.format_version = RO_TRAJ_FORMAT_ABI1;
    h.env = h.env_spec = "fuzz";
    h.num_envs = ENVS;
    h.obs_dim = OBS;
    h.action_kind = "discrete";
    h.action_dim = 1;
    h.max_record_bytes = 1u << 16;
    off += put(file + off, &h.base);
    for (uint32_t i = 0; i < BATCHES; i++) {
        uint32_t env[ENVS], step[ENVS], flags[ENVS];
        uint64_t ep[ENVS];
        float rew[ENVS], obs[ENVS * OBS];
        int32_t act[ENVS];
        for (uint32_t k = 0; k < ENVS; k++) {
            env[k] = k;
            step[k] = i + 1;
            flags[k] = 0;
            ep[k] = 0;
            rew[k] = (float)i;
            act[k] = (int32_t)(k % 2);
            for (uint32_t j = 0; j < OBS; j++)
                obs[k * OBS + j] = (float)(i + j);
        }
        Rollout__V1__TransitionBatch b = ROLLOUT__V1__TRANSITION_BATCH__INIT;
        b.record = i + 1;
        b.n_env = b.n_episode = b.n_step = b.n_flags = b.n_reward = b.n_action = ENVS;
        b.env = env;
        b.episode = ep;
        b.step = step;
        b.flags = flags;
        b.reward = rew;
        b.action = act;
        b.n_obs = ENVS * OBS;
        b.obs = obs;
        off += put(file + off, &b.base);
    }
    file_len = off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!file)
        make_file();
    if (size < 5)
        return 0;
    size_t at =
        ((size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24) %
        file_len;
    bool insert = data[4] & 1;
    const uint8_t *damage = data + 5;
    size_t dlen = size - 5;
    if (!insert && dlen > file_len - at)
        dlen = file_len - at;
    size_t len = insert ? file_len + dlen : file_len;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    memcpy(buf, file, at);
    memcpy(buf + at, damage, dlen);
    if (insert)
        memcpy(buf + at + dlen, file + at, file_len - at);
    else
        memcpy(buf + at + dlen, file + at + dlen, file_len - at - dlen);
    crc_bytes = 0;
    ro_traj_reader_t r;
    char err[256];
    if (ro__traj_reader_open(&r, buf, len, true, err, sizeof err) == 0) {
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev;
        uint64_t last = 0;
        while ((ev = ro__traj_reader_next(&r, &b)) != RO_TRAJ_EOF) {
            if (ev != RO_TRAJ_BATCH)
                continue;
            if (ro__traj_validate_batch(r.hdr, b, err, sizeof err) != 0 || b->record <= last)
                abort(); /* invalid, repeated or out of order */
            last = b->record;
            ro__traj_batch_free(&r, b);
        }
        ro__traj_reader_close(&r);
    }
    /* The bound of reader.h: a few passes plus 2 * RO_TRAJ_CP per byte. */
    if (crc_bytes > 4 * (uint64_t)len + 2 * RO_TRAJ_CP * (uint64_t)len)
        abort();
    free(buf);
    return 0;
}
