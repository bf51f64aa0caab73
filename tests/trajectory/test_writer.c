/*
 * Writing trajectory files (src/trajectory/writer.c): what it writes reads
 * back exactly, it rotates to numbered parts that each start with a header,
 * and a write that fails part-way (a full disk) leaves a file that ends on
 * its last whole record, with what was lost counted.
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
#include <unistd.h>

#include "traj_fixture.h"
#include "tmpdir_fixture.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("traj_writer");
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
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_write_fails_midway),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
