/*
 * Reading trajectory files (src/trajectory/reader.c): every kind of damage
 * (cut short at every byte, flipped bytes, foreign files, bad headers) gives
 * a clean event or error naming where, and a deterministic mini-fuzz of the
 * reader never crashes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "traj_fixture.h"
#include "tmpdir_fixture.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("traj_reader");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_short_everywhere),
        cmocka_unit_test(test_flipped_byte),
        cmocka_unit_test(test_not_a_trajectory_file),
        cmocka_unit_test(test_mini_fuzz),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
