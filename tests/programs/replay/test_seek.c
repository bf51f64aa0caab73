/*
 * rollout-replay --from (programs/replay/seek.c) on recordings with snapshots
 * (format version 3) whose every entry the test knows
 * (tests/recording_fixture.h): from any step, --verify replays bit for bit
 * from the envs' snapshots and starts reading near the step, not at the
 * first record; --dump from a step prints exactly the entries a full dump
 * prints from there; the file's snapshot index is there in every part; and
 * a snapshot or index someone changed is refused by name before any env
 * sees it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "recording_fixture.h"
#include "replay/replay.h"
#include "runtime/error.h"
#include "tmpdir_fixture.h"
#include "trajectory/crc32c.h"
#include "trajectory/snapshot_index.h"
#include "wire/varint.h"

#define STEPS 400 /* shard steps: REC_ENVS x 400 env steps */
#define EVERY 50  /* --snapshot-every */

static char path[256];

/* run replays the file (parts: path, path.1, ...: nparts) with the given
 * mode; *out and *log get what it wrote (free them). Returns the status. */
static int run(const char *const *paths, size_t nparts, bool verify, bool dump, bool from_set,
               uint64_t from, char **out, char **log)
{
    size_t ol, ll;
    FILE *of = open_memstream(out, &ol), *lf = open_memstream(log, &ll);
    assert_non_null(of);
    assert_non_null(lf);
    ro_replay_opts_t o = {.verify = verify,
                          .dump = dump,
                          .resync = true,
                          .from_set = from_set,
                          .from = from,
                          .out = of,
                          .log = lf};
    ro_replay_t *r;
    assert_int_equal(ro__replay_new(&r, &o), 0);
    int rc = RO_REPLAY_OK;
    for (size_t i = 0; i < nparts && rc == RO_REPLAY_OK; i++)
        rc = ro__replay_feed_path(r, paths[i]);
    int fin = ro__replay_finish(r);
    ro__replay_free(r);
    fclose(of);
    fclose(lf);
    return rc != RO_REPLAY_OK ? rc : fin;
}

/* suffix returns the dump lines of `all` from the step-th step entry on
 * (the resets between count with the step after them). */
static const char *suffix(const char *all, uint64_t step)
{
    const char *p = all;
    for (uint64_t seen = 0; *p; p = strchr(p, '\n') + 1) {
        bool is_step =
            strstr(p, "\"reset\":false") && strstr(p, "\"reset\":false") < strchr(p, '\n');
        if (is_step && seen++ == step)
            break;
    }
    /* Back over the reset lines just before it: --from prints them too. */
    while (p > all) {
        const char *prev = p - 1;
        while (prev > all && prev[-1] != '\n')
            prev--;
        if (!(strstr(prev, "\"reset\":true") && strstr(prev, "\"reset\":true") < p))
            break;
        p = prev;
    }
    return p;
}

static void test_from_any_step(void **state)
{
    (void)state;
    const char *paths[] = {path};
    char *all, *log;
    assert_int_equal(run(paths, 1, false, true, false, 0, &all, &log), RO_REPLAY_OK);
    free(log);
    const uint64_t total = (uint64_t)STEPS * REC_ENVS;
    const uint64_t froms[] = {0, 7, EVERY * REC_ENVS - 1, EVERY * REC_ENVS, 777, total - 1, total};
    for (size_t i = 0; i < sizeof froms / sizeof froms[0]; i++) {
        uint64_t from = froms[i];
        char *out, *vlog;
        assert_int_equal(run(paths, 1, true, false, true, from, &out, &vlog), RO_REPLAY_OK);
        if (!strstr(vlog, "verify OK"))
            fail_msg("--from %" PRIu64 ": %s", from, vlog);
        /* The envs all have a snapshot once every env took EVERY steps. */
        char want[128];
        uint64_t restored = from >= EVERY * REC_ENVS ? REC_ENVS : 0;
        snprintf(want, sizeof want, "--from %" PRIu64 ": %" PRIu64 " env(s) started from snapshots",
                 from, restored);
        if (!strstr(vlog, want))
            fail_msg("expected '%s' in: %s", want, vlog);
        /* It read from near the step: a snapshot record at most EVERY shard
         * steps (of 1 record each) before it. */
        const char *at = strstr(vlog, "reading from record ");
        assert_non_null(at);
        uint64_t rec = strtoull(at + strlen("reading from record "), NULL, 10);
        if (restored)
            assert_true(rec + EVERY + 2 >= from / REC_ENVS && rec > 1);
        else
            assert_int_equal(rec, 1);
        free(out);
        free(vlog);
        char *dump;
        assert_int_equal(run(paths, 1, false, true, true, from, &dump, &vlog), RO_REPLAY_OK);
        assert_string_equal(dump, suffix(all, from));
        free(dump);
        free(vlog);
    }
    free(all);
}

/* Every part of a rotated recording ends with its own index. */
static void test_index_per_part(void **state)
{
    (void)state;
    char p[256], part[300];
    snprintf(p, sizeof p, "%s/parts.traj", tmpdir);
    ro_recorder_stats_t st = record_steps_snap(p, STEPS, 32 << 10, EVERY);
    assert_true(st.files > 1);
    assert_int_equal(st.snapshots, (uint64_t)STEPS / EVERY * REC_ENVS);
    uint64_t entries = 0, steps = 0;
    for (uint32_t i = 0; i < st.files; i++) {
        if (i)
            snprintf(part, sizeof part, "%s.%u", p, i);
        else
            snprintf(part, sizeof part, "%s", p);
        size_t len;
        uint8_t *data = slurp_file(part, &len);
        ro_traj_reader_t r;
        ro_traj_index_t ix;
        char err[256];
        assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
        assert_int_equal(r.hdr->format_version, RO_TRAJ_FORMAT_SNAPSHOTS);
        assert_int_equal(r.hdr->snapshot_every, EVERY);
        if (ro__traj_index_load(&r, &ix, err, sizeof err) != 0)
            fail_msg("part %u: %s", i, err);
        assert_true(ix.steps >= steps);
        steps = ix.steps;
        for (size_t k = 0; k < ix.n; k++) {
            assert_int_equal(ix.env_steps[k] % EVERY, 0);
            /* The entry's record is where the index says it is. */
            Rollout__V1__TransitionBatch *b;
            ro__traj_reader_seek(&r, (size_t)ix.offset[k], ix.record[k]);
            assert_int_equal(ro__traj_reader_next(&r, &b), RO_TRAJ_BATCH);
            assert_int_equal(b->record, ix.record[k]);
            bool found = false;
            for (size_t j = 0; j < b->n_snapshots; j++)
                found |= b->snapshots[j]->env == ix.env[k];
            assert_true(found);
            ro__traj_batch_free(&r, b);
        }
        entries += ix.n;
        ro__traj_index_free(&ix);
        ro__traj_reader_close(&r);
        free(data);
    }
    assert_int_equal(entries, st.snapshots);
    assert_int_equal(steps, (uint64_t)STEPS * REC_ENVS);
}

/* reframe recomputes the CRC of the record around byte `at` of data. */
static void reframe(uint8_t *data, size_t len, size_t at)
{
    size_t off = RO_TRAJ_MAGIC_LEN;
    while (off < len) {
        uint64_t mlen;
        int h = ro__traj_record_prefix(data + off, len - off, &mlen);
        assert_true(h > 0);
        size_t end = off + (size_t)h + (size_t)mlen;
        if (at >= off && at < end) {
            ro__traj_put_le32(data + end, ro__crc32c(0, data + off + h, (size_t)mlen));
            return;
        }
        off = end + RO_TRAJ_CRC_BYTES;
    }
    fail_msg("no record holds byte %zu", at);
}

/* find returns the offset of the n-th occurrence of s in data. */
static size_t find(const uint8_t *data, size_t len, const char *s, int n)
{
    size_t sl = strlen(s);
    for (size_t i = 0; i + sl <= len; i++)
        if (memcmp(data + i, s, sl) == 0 && n-- == 0)
            return i;
    fail_msg("'%s' not found", s);
    return 0;
}

static void write_file(const char *p, const uint8_t *data, size_t len)
{
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A snapshot whose blob says another env, or another size, is refused by
 * name, with a valid CRC: the blob's own checks catch it, not the CRC. */
static void test_changed_snapshot_refused(void **state)
{
    (void)state;
    size_t len;
    uint8_t *data = slurp_file(path, &len);
    char p[256];
    snprintf(p, sizeof p, "%s/changed.traj", tmpdir);
    const char *paths[] = {p};
    /* Env 0's first snapshot: its name. Step 300 starts from the first
     * snapshot of each env (the second ones end after step 400). */
    size_t at = find(data, len, "ROES", 0);
    data[at + 8] = 'x';
    reframe(data, len, at);
    write_file(p, data, len);
    char *out, *log;
    assert_int_equal(run(paths, 1, true, false, true, 300, &out, &log), RO_REPLAY_FAILED);
    if (!strstr(log, "'s snapshot: env state of env 'xartpole', not of env 'cartpole'"))
        fail_msg("%s", log);
    free(out);
    free(log);
    /* Its size field, one byte more than follows. */
    data[at + 8] = 'c';
    data[at + 88]++;
    reframe(data, len, at);
    write_file(p, data, len);
    assert_int_equal(run(paths, 1, true, false, true, 300, &out, &log), RO_REPLAY_FAILED);
    if (!strstr(log, "env state: its header says 65 bytes of state, 64 follow"))
        fail_msg("%s", log);
    free(out);
    free(log);
    free(data);
}

/* A damaged footer: no seek, a note, and the file is verified from its
 * start. */
static void test_damaged_index_reads_from_start(void **state)
{
    (void)state;
    size_t len;
    uint8_t *data = slurp_file(path, &len);
    char p[256];
    snprintf(p, sizeof p, "%s/noindex.traj", tmpdir);
    const char *paths[] = {p};
    data[len - 1] ^= 0x55; /* the footer's CRC */
    write_file(p, data, len);
    char *out, *log;
    /* The damaged footer is a damaged record (status 1); every step still
     * replays bit for bit from the start. */
    assert_int_equal(run(paths, 1, true, false, true, 1000, &out, &log), RO_REPLAY_FAILED);
    if (!strstr(log, "no snapshot index at its end") || !strstr(log, "1600 steps and ") ||
        !strstr(log, "damaged record(s)") || !strstr(log, "0 env(s) started from snapshots"))
        fail_msg("%s", log);
    free(out);
    free(log);
    free(data);
}

static int setup(void **state)
{
    (void)state;
    if (tmpdir_create("seek"))
        return -1;
    snprintf(path, sizeof path, "%s/snap.traj", tmpdir);
    record_steps_snap(path, STEPS, 0, EVERY);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_any_step),
        cmocka_unit_test(test_index_per_part),
        cmocka_unit_test(test_changed_snapshot_refused),
        cmocka_unit_test(test_damaged_index_reads_from_start),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
