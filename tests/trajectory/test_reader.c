/*
 * Tests of CRC-32C and of trajectory files: writer/reader round trips,
 * rotation, every kind of damage (cut short at every byte, flipped bytes,
 * foreign files, bad headers, invalid records), a deterministic
 * mini-fuzz of the reader, and writes that fail part-way (a full disk).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trajectory/crc32c.h"
#include "runtime/error.h"
#include "trajectory/reader.h"
#include "trajectory/writer.h"
#include "tmpdir_fixture.h"

#define ERRLEN 512
#define OBS_DIM 3
#define ENVS 4

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("traj");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

static void tmp_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* ---- CRC-32C ---- */

static void test_crc_check_value(void **state)
{
    (void)state;
    assert_int_equal(ro__crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(ro__crc32c_sw(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(ro__crc32c(0, "", 0), 0u);
    /* Incremental == one shot; hardware == table, at every alignment. */
    uint8_t buf[1000];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 200; len += 7) {
            uint32_t a = ro__crc32c(0, buf + off, len);
            assert_int_equal(a, ro__crc32c_sw(0, buf + off, len));
            uint32_t b =
                ro__crc32c(ro__crc32c(0, buf + off, len / 2), buf + off + len / 2, len - len / 2);
            assert_int_equal(a, b);
        }
    /* 32 bytes of zeros: RFC 3720 B.4. */
    uint8_t z[32] = {0};
    assert_int_equal(ro__crc32c(0, z, 32), 0x8A9136AAu);
}

/* ---- writing test files ---- */

typedef struct fixture_file {
    Rollout__V1__TrajectoryHeader hdr;
    Rollout__V1__EnvArg arg;
    Rollout__V1__EnvArg *argp;
} fixture_file_t;

static void make_header(fixture_file_t *f)
{
    rollout__v1__trajectory_header__init(&f->hdr);
    rollout__v1__env_arg__init(&f->arg);
    f->arg.key = "cost_us";
    f->arg.value = "3";
    f->argp = &f->arg;
    f->hdr.magic = RO_TRAJ_HEADER_MAGIC;
    f->hdr.format_version = RO_TRAJ_FORMAT_VERSION;
    f->hdr.env = "test";
    f->hdr.env_spec = "test";
    f->hdr.env_args = &f->argp;
    f->hdr.n_env_args = 1;
    f->hdr.seed = 42;
    f->hdr.num_envs = ENVS;
    f->hdr.policy = "random";
    f->hdr.obs_dim = OBS_DIM;
    f->hdr.action_kind = "discrete";
    f->hdr.action_dim = 1;
    f->hdr.max_record_bytes = 4096;
}

/* Batch i: ENVS step entries with values derived from i. */
typedef struct batch_data {
    uint32_t env[ENVS], step[ENVS], flags[ENVS];
    uint64_t episode[ENVS];
    float reward[ENVS], obs[ENVS * OBS_DIM];
    int32_t action[ENVS];
    Rollout__V1__TransitionBatch b;
} batch_data_t;

static void make_batch(batch_data_t *d, uint32_t i)
{
    rollout__v1__transition_batch__init(&d->b);
    for (uint32_t k = 0; k < ENVS; k++) {
        d->env[k] = k;
        d->episode[k] = i / 10;
        d->step[k] = i % 10 + 1;
        d->flags[k] = (i % 10 == 9) ? RO_TRAJ_TERMINATED : 0;
        d->reward[k] = (float)i + 0.25f * (float)k;
        d->action[k] = (int32_t)((i + k) % 2);
        for (uint32_t j = 0; j < OBS_DIM; j++)
            d->obs[k * OBS_DIM + j] = (float)i * 0.5f - (float)j + (float)k;
    }
    Rollout__V1__TransitionBatch *b = &d->b;
    b->n_env = b->n_episode = b->n_step = b->n_flags = b->n_reward = b->n_action = ENVS;
    b->env = d->env;
    b->episode = d->episode;
    b->step = d->step;
    b->flags = d->flags;
    b->reward = d->reward;
    b->action = d->action;
    b->n_obs = ENVS * OBS_DIM;
    b->obs = d->obs;
}

static uint64_t write_file(const char *path, uint32_t batches, uint64_t max_bytes, uint32_t *parts)
{
    fixture_file_t f;
    make_header(&f);
    ro_traj_writer_t w;
    char err[ERRLEN];
    assert_int_equal(ro__traj_writer_open(&w, path, &f.hdr, max_bytes, err, sizeof err), 0);
    for (uint32_t i = 0; i < batches; i++) {
        batch_data_t d;
        make_batch(&d, i);
        assert_int_equal(ro__traj_writer_append(&w, &d.b, err, sizeof err), 0);
    }
    uint64_t total = w.total_bytes;
    if (parts)
        *parts = w.part + 1;
    assert_int_equal(ro__traj_writer_close(&w, err, sizeof err), 0);
    return total;
}

static void check_batch(const Rollout__V1__TransitionBatch *b, uint32_t i)
{
    batch_data_t d;
    make_batch(&d, i);
    assert_int_equal(b->n_env, ENVS);
    assert_memory_equal(b->env, d.env, sizeof d.env);
    assert_memory_equal(b->episode, d.episode, sizeof d.episode);
    assert_memory_equal(b->step, d.step, sizeof d.step);
    assert_memory_equal(b->flags, d.flags, sizeof d.flags);
    assert_memory_equal(b->reward, d.reward, sizeof d.reward);
    assert_memory_equal(b->action, d.action, sizeof d.action);
    assert_memory_equal(b->obs, d.obs, sizeof d.obs);
}

/* The one-pass encoder gives protobuf-c's bytes exactly. */
static void test_encoder_matches_protobuf_c(void **state)
{
    (void)state;
    uint8_t a[8192], b2[8192];
    for (uint32_t i = 0; i < 300; i++) {
        batch_data_t d;
        make_batch(&d, i * 7919u);
        d.b.record = i % 3 ? (uint64_t)i * 1000003u : 0;
        d.b.dropped = i % 5 ? 0 : i;
        d.episode[1] = (uint64_t)i << (i % 60);
        d.env[0] = i * 2654435761u;
        d.action[2] = (int32_t)(i % 4) - 2; /* negative: 10-byte varints */
        if (i % 11 == 0)
            d.b.n_action = 0;
        if (i % 13 == 0)
            d.b.n_env = d.b.n_episode = d.b.n_step = d.b.n_flags = d.b.n_reward = d.b.n_obs = 0;
        size_t n = protobuf_c_message_get_packed_size(&d.b.base);
        assert_int_equal(ro__traj_batch_packed_size(&d.b), n);
        assert_int_equal(protobuf_c_message_pack(&d.b.base, a), n);
        assert_int_equal(ro__traj_batch_pack(&d.b, b2), n);
        assert_memory_equal(a, b2, n);
    }
    /* Box actions too. */
    float box[ENVS * 2] = {1.5f, -2.0f, 0.0f, 3.25f, -0.0f, 7.0f, 1e-30f, -1e30f};
    batch_data_t d;
    make_batch(&d, 5);
    d.b.n_action = 0;
    d.b.action_box = box;
    d.b.n_action_box = ENVS * 2;
    size_t n = protobuf_c_message_get_packed_size(&d.b.base);
    assert_int_equal(ro__traj_batch_pack(&d.b, b2), n);
    protobuf_c_message_pack(&d.b.base, a);
    assert_memory_equal(a, b2, n);
}

/* Reads every event; returns the batch indices seen (by their data). */
typedef struct outcome {
    uint32_t batches, cut_short, corrupt, resynced;
    uint64_t first_bad_record;
    char last_msg[256];
} outcome_t;

static void read_all(const uint8_t *data, size_t len, bool resync, outcome_t *o, bool check)
{
    memset(o, 0, sizeof *o);
    ro_traj_reader_t r;
    char err[ERRLEN];
    assert_int_equal(ro__traj_reader_open(&r, data, len, resync, err, sizeof err), 0);
    for (int guard = 0; guard < 1000000; guard++) {
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev = ro__traj_reader_next(&r, &b);
        if (ev == RO_TRAJ_EOF)
            break;
        if (ev == RO_TRAJ_BATCH) {
            if (check)
                check_batch(b, (uint32_t)b->record - 1);
            o->batches++;
            ro__traj_batch_free(&r, b);
        } else if (ev == RO_TRAJ_CUT_SHORT) {
            o->cut_short++;
        } else if (ev == RO_TRAJ_CORRUPT) {
            if (!o->corrupt)
                sscanf(r.msg, "record %lu", (unsigned long *)&o->first_bad_record);
            o->corrupt++;
        } else {
            o->resynced++;
        }
        snprintf(o->last_msg, sizeof o->last_msg, "%s", r.msg);
    }
    ro__traj_reader_close(&r);
}

static void test_round_trip(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "rt.traj");
    uint64_t total = write_file(p, 50, 0, NULL);
    size_t len;
    uint8_t *data = slurp(p, &len);
    assert_int_equal(len, total);
    assert_memory_equal(data, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN);
    ro_traj_reader_t r;
    char err[ERRLEN];
    assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
    assert_string_equal(r.hdr->env, "test");
    assert_int_equal(r.hdr->seed, 42);
    assert_int_equal(r.hdr->n_env_args, 1);
    assert_string_equal(r.hdr->env_args[0]->key, "cost_us");
    ro__traj_reader_close(&r);
    outcome_t o;
    read_all(data, len, true, &o, true);
    assert_int_equal(o.batches, 50);
    assert_int_equal(o.cut_short + o.corrupt + o.resynced, 0);
    free(data);
}

static void test_rotation(void **state)
{
    (void)state;
    char p[128], q[160];
    tmp_path(p, sizeof p, "rot.traj");
    uint32_t parts;
    write_file(p, 200, 4096, &parts);
    assert_true(parts > 2);
    uint32_t seen = 0;
    for (uint32_t k = 0; k < parts; k++) {
        if (k == 0)
            snprintf(q, sizeof q, "%s", p);
        else
            snprintf(q, sizeof q, "%s.%u", p, k);
        size_t len;
        uint8_t *data = slurp(q, &len);
        assert_true(len <= 4096);
        ro_traj_reader_t r;
        char err[ERRLEN];
        assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
        assert_int_equal(r.hdr->part, k); /* every part has its own header */
        ro__traj_reader_close(&r);
        outcome_t o;
        read_all(data, len, true, &o, false);
        assert_int_equal(o.cut_short + o.corrupt, 0);
        seen += o.batches;
        free(data);
    }
    assert_int_equal(seen, 200);
}

/* A file cut at every byte inside its last records: every complete record
 * is read and the cut is reported with its offset. */
static void test_cut_short_everywhere(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "cut.traj");
    write_file(p, 20, 0, NULL);
    size_t len;
    uint8_t *data = slurp(p, &len);
    /* Offsets of record ends: read once. */
    size_t ends[32];
    size_t nends = 0;
    {
        ro_traj_reader_t r;
        char err[ERRLEN];
        assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
        ends[nends++] = r.off;
        Rollout__V1__TransitionBatch *b;
        while (ro__traj_reader_next(&r, &b) == RO_TRAJ_BATCH) {
            ro__traj_batch_free(&r, b);
            ends[nends++] = r.off;
        }
        ro__traj_reader_close(&r);
    }
    assert_int_equal(nends, 21);
    for (size_t cut = ends[0]; cut < len; cut++) {
        uint8_t *copy = malloc(cut);
        memcpy(copy, data, cut);
        uint32_t complete = 0;
        while (complete + 1 < nends && ends[complete + 1] <= cut)
            complete++;
        outcome_t o;
        read_all(copy, cut, true, &o, true);
        assert_int_equal(o.batches, complete);
        assert_int_equal(o.corrupt, 0);
        assert_int_equal(o.cut_short, cut == ends[complete] ? 0 : 1);
        if (o.cut_short) {
            char want[64];
            snprintf(want, sizeof want, "at byte %zu", ends[complete]);
            assert_non_null(strstr(o.last_msg, want));
        }
        free(copy);
    }
    /* Cut inside the header: not readable at all, and said so. */
    for (size_t cut = 0; cut < ends[0]; cut++) {
        ro_traj_reader_t r;
        char err[ERRLEN] = "";
        assert_int_equal(ro__traj_reader_open(&r, data, cut, true, err, sizeof err), RO_EBADMSG);
        assert_true(err[0] != '\0');
    }
    free(data);
}

/* A flipped byte inside record k's payload: CRC mismatch for record k; with
 * resync every other record is read; without, reading stops cleanly. */
static void test_flipped_byte(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "flip.traj");
    write_file(p, 20, 0, NULL);
    size_t len;
    uint8_t *data = slurp(p, &len);
    ro_traj_reader_t r;
    char err[ERRLEN];
    assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
    size_t starts[32];
    size_t n = 0;
    starts[n++] = r.off;
    Rollout__V1__TransitionBatch *b;
    while (ro__traj_reader_next(&r, &b) == RO_TRAJ_BATCH) {
        ro__traj_batch_free(&r, b);
        starts[n++] = r.off;
    }
    ro__traj_reader_close(&r);

    size_t at = starts[6] + 10; /* inside record 7's payload */
    data[at] ^= 0x10;
    outcome_t o;
    read_all(data, len, true, &o, true);
    assert_int_equal(o.corrupt, 1);
    assert_int_equal(o.first_bad_record, 7);
    assert_int_equal(o.resynced, 1);
    assert_int_equal(o.batches, 19);

    read_all(data, len, false, &o, true);
    assert_int_equal(o.corrupt, 1);
    assert_int_equal(o.resynced, 0);
    assert_int_equal(o.batches, 6);
    assert_non_null(strstr(o.last_msg, "CRC mismatch"));

    /* A damaged length byte. */
    data[at] ^= 0x10;
    data[starts[3]] ^= 0x7F;
    read_all(data, len, true, &o, true);
    assert_true(o.corrupt >= 1);
    assert_int_equal(o.first_bad_record, 4);
    assert_int_equal(o.batches, 19);
    free(data);
}

static void test_not_a_trajectory_file(void **state)
{
    (void)state;
    char err[ERRLEN];
    ro_traj_reader_t r;
    const char *text = "hello, this is a text file\n";
    assert_int_equal(
        ro__traj_reader_open(&r, (const uint8_t *)text, strlen(text), true, err, sizeof err),
        RO_EBADMSG);
    assert_non_null(strstr(err, "not a trajectory file"));
    assert_int_equal(ro__traj_reader_open(&r, (const uint8_t *)"", 0, true, err, sizeof err),
                     RO_EBADMSG);

    /* The right magic, a header record whose CRC is wrong. */
    char p[128];
    tmp_path(p, sizeof p, "hdr.traj");
    write_file(p, 1, 0, NULL);
    size_t len;
    uint8_t *data = slurp(p, &len);
    data[RO_TRAJ_MAGIC_LEN + 3] ^= 1;
    assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "CRC"));
    free(data);

    /* A valid record that is not a header (wrong magic, version). */
    fixture_file_t f;
    make_header(&f);
    f.hdr.format_version = 99;
    uint8_t buf[1024];
    memcpy(buf, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN);
    size_t n = RO_TRAJ_MAGIC_LEN + ro__traj_frame(buf + RO_TRAJ_MAGIC_LEN, &f.hdr.base);
    assert_int_equal(ro__traj_reader_open(&r, buf, n, true, err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "version 99"));
    make_header(&f);
    f.hdr.magic = "something-else";
    n = RO_TRAJ_MAGIC_LEN + ro__traj_frame(buf + RO_TRAJ_MAGIC_LEN, &f.hdr.base);
    assert_int_equal(ro__traj_reader_open(&r, buf, n, true, err, sizeof err), RO_EBADMSG);
    make_header(&f);
    f.hdr.obs_dim = 0;
    n = RO_TRAJ_MAGIC_LEN + ro__traj_frame(buf + RO_TRAJ_MAGIC_LEN, &f.hdr.base);
    assert_int_equal(ro__traj_reader_open(&r, buf, n, true, err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "obs_dim"));
}

/* Records with valid CRCs but inconsistent contents are damage too. */
static void test_invalid_records(void **state)
{
    (void)state;
    fixture_file_t f;
    make_header(&f);
    uint8_t buf[8192];
    memcpy(buf, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN);
    size_t n = RO_TRAJ_MAGIC_LEN + ro__traj_frame(buf + RO_TRAJ_MAGIC_LEN, &f.hdr.base);
    batch_data_t d;
    for (int variant = 0; variant < 5; variant++) {
        size_t m = n;
        make_batch(&d, 0);
        d.b.record = 1;
        m += ro__traj_frame(buf + m, &d.b.base); /* good */
        make_batch(&d, 1);
        d.b.record = 2;
        if (variant == 0)
            d.b.n_obs--; /* wrong number of observation values */
        else if (variant == 1)
            d.env[2] = ENVS; /* env out of range */
        else if (variant == 2)
            d.b.n_reward = 1; /* columns differ */
        else if (variant == 3)
            d.flags[0] = RO_TRAJ_RESET; /* a reset with step != 0 */
        else
            d.b.n_action = 0; /* no actions */
        m += ro__traj_frame(buf + m, &d.b.base);
        make_batch(&d, 2);
        d.b.record = 3;
        m += ro__traj_frame(buf + m, &d.b.base); /* good */
        outcome_t o;
        read_all(buf, m, true, &o, true);
        assert_int_equal(o.batches, 2);
        assert_int_equal(o.corrupt, 1);
        assert_int_equal(o.first_bad_record, 2);
        assert_non_null(strstr(o.last_msg, "resynchronised"));
    }
}

/* Thousands of damaged files through the reader: each gives a clean result
 * or a clean error, never a crash (ASan/UBSan builds check the rest). */
static void test_mini_fuzz(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "fuzz.traj");
    write_file(p, 12, 0, NULL);
    size_t len;
    uint8_t *orig = slurp(p, &len);
    uint8_t *copy = malloc(len);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    uint32_t opened = 0;
    for (int iter = 0; iter < 4000; iter++) {
        memcpy(copy, orig, len);
        size_t n = len;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int flips = 1 + (int)(x % 4);
        for (int k = 0; k < flips; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            /* Bias towards the header and record boundaries, as well as anywhere. */
            size_t at = (iter % 3 == 0) ? x % 64 : x % len;
            copy[at] ^= (uint8_t)(1u << ((x >> 32) % 8));
        }
        if (iter % 5 == 0)
            n = (size_t)((x >> 16) % (len + 1));
        ro_traj_reader_t r;
        char err[ERRLEN];
        if (ro__traj_reader_open(&r, copy, n, iter % 2 == 0, err, sizeof err) != 0) {
            assert_true(err[0] != '\0');
            continue;
        }
        opened++;
        int events = 0;
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev;
        while ((ev = ro__traj_reader_next(&r, &b)) != RO_TRAJ_EOF) {
            if (ev == RO_TRAJ_BATCH) {
                /* Whatever was read passed validation: indices are usable. */
                for (size_t k = 0; k < b->n_env; k++)
                    assert_true(b->env[k] < r.hdr->num_envs);
                assert_int_equal(b->n_obs, b->n_env * r.hdr->obs_dim);
                ro__traj_batch_free(&r, b);
            }
            assert_true(++events < 1000);
        }
        ro__traj_reader_close(&r);
    }
    assert_true(opened > 100);
    free(copy);
    free(orig);
}

/* A write that fails part-way (here: the file size limit, as a full disk
 * would) leaves a file that ends on its last whole record, and the writer
 * counts what it lost. */
static void test_write_fails_midway(void **state)
{
    (void)state;
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_IGN); /* get EFBIG instead of the signal */
    const rlim_t limits[] = {0, 5, 40, 200, 1000, 4097, 65536, 300001, 1048577};
    for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
        char p[128];
        tmp_path(p, sizeof p, "full.traj");
        fixture_file_t f;
        make_header(&f);
        ro_traj_writer_t w;
        char err[ERRLEN] = "";
        assert_int_equal(ro__traj_writer_open(&w, p, &f.hdr, 0, err, sizeof err), 0);
        struct rlimit lim = {limits[li], old.rlim_max};
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        uint32_t appended = 0;
        int rc = 0;
        while (appended < 12000 && rc == 0) {
            batch_data_t d;
            make_batch(&d, appended);
            rc = ro__traj_writer_append(&w, &d.b, err, sizeof err);
            appended += rc == 0;
        }
        uint64_t kept = w.file_records, kept_bytes = w.file_bytes;
        if (rc == 0) { /* everything fit in the buffer: the close writes it */
            rc = ro__traj_writer_close(&w, err, sizeof err);
            kept = w.file_records;
            kept_bytes = w.file_bytes;
        } else {
            char ignore[ERRLEN];
            ro__traj_writer_close(&w, ignore, sizeof ignore);
        }
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(err, "File too large"));
        assert_non_null(strstr(err, "last whole record"));
        assert_int_equal(kept + w.lost_records, appended);
        assert_int_equal(w.lost_steps, w.lost_records * ENVS);
        size_t len;
        uint8_t *data = slurp(p, &len);
        assert_int_equal(len, kept_bytes);
        assert_true(len <= limits[li]);
        if (len > 0) {
            outcome_t o;
            read_all(data, len, false, &o, true);
            assert_int_equal(o.batches, kept);
            assert_int_equal(o.cut_short + o.corrupt + o.resynced, 0);
        } else {
            assert_int_equal(kept, 0);
        }
        free(data);
        unlink(p);
    }
    signal(SIGXFSZ, SIG_DFL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_check_value),
        cmocka_unit_test(test_encoder_matches_protobuf_c),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_cut_short_everywhere),
        cmocka_unit_test(test_flipped_byte),
        cmocka_unit_test(test_not_a_trajectory_file),
        cmocka_unit_test(test_invalid_records),
        cmocka_unit_test(test_mini_fuzz),
        cmocka_unit_test(test_write_fails_midway),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
