/*
 * Resynchronising and reading through a window (src/trajectory/reader.c):
 * after crafted damage, resync costs a bounded number of CRC bytes per byte
 * of the file (counted by wrapping ro__crc32c at link time: no clock); a
 * crafted record whose CRC holds but that is not valid is skipped whole (a
 * valid record hidden inside it is not taken); a file read with pread gives
 * what memory gives, also when the damage spans read windows; and a file
 * cut while it is read ends with RO_TRAJ_SHRANK, every complete record
 * before the cut read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/error.h"
#include "traj_fixture.h"
#include "tmpdir_fixture.h"
#include "trajectory/crc32c.h"
#include "wire/varint.h"

/* Every byte the reader hands to the CRC (-Wl,--wrap=ro__crc32c). */
static uint64_t crc_bytes;

uint32_t __real_ro__crc32c(uint32_t crc, const void *data, size_t len);
uint32_t __wrap_ro__crc32c(uint32_t crc, const void *data, size_t len)
{
    crc_bytes += len;
    return __real_ro__crc32c(crc, data, len);
}

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("traj_resync");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

/* A file of n batches whose header allows records of max_record bytes; its
 * bytes in *len, the offset after each record in ends[0..n] (ends[0]: after
 * the header). */
static uint8_t *file_of(uint32_t n, uint32_t max_record, size_t *len, size_t *ends)
{
    char path[128];
    snprintf(path, sizeof path, "%s/f.traj", tmpdir);
    fixture_file_t f;
    make_header(&f);
    f.hdr.max_record_bytes = max_record;
    ro_traj_writer_t w;
    char err[ERRLEN];
    assert_int_equal(ro__traj_writer_open(&w, path, &f.hdr, 0, err, sizeof err), 0);
    for (uint32_t i = 0; i < n; i++) {
        batch_data_t d;
        make_batch(&d, i);
        assert_int_equal(ro__traj_writer_append(&w, &d.b, err, sizeof err), 0);
    }
    assert_int_equal(ro__traj_writer_close(&w, err, sizeof err), 0);
    uint8_t *data = slurp(path, len);
    ro_traj_reader_t r;
    assert_int_equal(ro__traj_reader_open(&r, data, *len, true, err, sizeof err), 0);
    size_t k = 0;
    ends[k++] = r.off;
    Rollout__V1__TransitionBatch *b;
    while (ro__traj_reader_next(&r, &b) == RO_TRAJ_BATCH) {
        ro__traj_batch_free(&r, b);
        ends[k++] = r.off;
    }
    ro__traj_reader_close(&r);
    assert_int_equal(k, n + 1);
    return data;
}

/* data with `insert` bytes put at offset at. */
static uint8_t *insert_bytes(const uint8_t *data, size_t len, size_t at, const uint8_t *insert,
                             size_t n, size_t *out_len)
{
    uint8_t *out = malloc(len + n);
    assert_non_null(out);
    memcpy(out, data, at);
    memcpy(out + at, insert, n);
    memcpy(out + at + n, data + at, len - at);
    *out_len = len + n;
    return out;
}

/* Damage crafted for the most work: at three offsets in four a length
 * prefix (512 KiB, 4 KiB, 32 bytes) followed by the byte every batch starts
 * with. */
static uint8_t *crafted_damage(size_t n)
{
    static const uint8_t unit[4] = {0x80, 0x80, 0x20, 0x08};
    uint8_t *d = malloc(n);
    assert_non_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = unit[i % 4];
    return d;
}

typedef struct seen {
    uint32_t batches, corrupt, resynced, shrank, cut_short;
    uint64_t last_record;
    size_t first_resync_off;
    char last_msg[256];
} seen_t;

static void read_events(ro_traj_reader_t *r, seen_t *s)
{
    memset(s, 0, sizeof *s);
    for (;;) {
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev = ro__traj_reader_next(r, &b);
        if (ev == RO_TRAJ_EOF)
            break;
        if (ev == RO_TRAJ_BATCH) {
            check_batch(b, (uint32_t)b->record - 1);
            assert_true(b->record > s->last_record); /* never a record twice */
            s->last_record = b->record;
            s->batches++;
            ro__traj_batch_free(r, b);
            continue;
        }
        snprintf(s->last_msg, sizeof s->last_msg, "%s", r->msg);
        if (ev == RO_TRAJ_CORRUPT)
            s->corrupt++;
        else if (ev == RO_TRAJ_RESYNCED && s->resynced++ == 0)
            s->first_resync_off = r->off;
        else if (ev == RO_TRAJ_SHRANK)
            s->shrank++;
        else if (ev == RO_TRAJ_CUT_SHORT)
            s->cut_short++;
    }
}

/* The bound (reader.h): a few CRC passes over the file, plus at most
 * 2 * RO_TRAJ_CP bytes per damaged byte scanned, whatever the damage (it
 * was a record's length per damaged byte: quadratic). */
static uint64_t crc_bound(size_t len, size_t damage)
{
    return 4 * (uint64_t)len + 2 * RO_TRAJ_CP * (uint64_t)damage;
}

static void test_crafted_damage_costs_linear_crc_work(void **state)
{
    (void)state;
    enum { N = 20000, DAMAGE = 64 << 10 };
    static size_t ends[N + 1];
    size_t len, blen;
    uint8_t *data = file_of(N, 1u << 20, &len, ends);
    uint8_t *damage = crafted_damage(DAMAGE);
    uint8_t *bad = insert_bytes(data, len, ends[10], damage, DAMAGE, &blen);
    ro_traj_reader_t r;
    char err[ERRLEN];
    crc_bytes = 0;
    assert_int_equal(ro__traj_reader_open(&r, bad, blen, true, err, sizeof err), 0);
    seen_t s;
    read_events(&r, &s);
    ro__traj_reader_close(&r);
    print_message("resync over %d crafted bytes in a %zu-byte file: %llu CRC bytes (bound %llu)\n",
                  DAMAGE, blen, (unsigned long long)crc_bytes,
                  (unsigned long long)crc_bound(blen, DAMAGE));
    assert_true(crc_bytes <= crc_bound(blen, DAMAGE));
    /* It did find its way back: the damage, then the records after it. */
    assert_true(s.corrupt >= 1);
    assert_true(s.resynced >= 1);
    assert_int_equal(s.last_record, N);
    assert_true(s.batches >= N - 2);
    free(bad);
    free(damage);
    free(data);
}

/* A record whose CRC holds but that is not valid is damage as a whole:
 * scanning goes on after it, not inside it, where a copy of a valid record
 * hides (taking it would make every nested copy another decode). */
static void test_crc_valid_invalid_record_is_skipped_whole(void **state)
{
    (void)state;
    enum { N = 12 };
    size_t ends[N + 1], len;
    uint8_t *data = file_of(N, 4096, &len, ends);
    /* The outer payload: record = 5, then packed floats holding a whole
     * framed copy of record 8 (padded to a multiple of 4). No entries: not
     * a valid batch, though it decodes and its CRC holds. */
    size_t inner = ends[8] - ends[7], pad = (4 - inner % 4) % 4;
    uint8_t payload[600];
    size_t p = 0;
    payload[p++] = 0x08;
    payload[p++] = 5;
    payload[p++] = (10 << 3) | 2;
    p += ro__varint_put(payload + p, inner + pad);
    memcpy(payload + p, data + ends[7], inner);
    p += inner;
    memset(payload + p, 0, pad);
    p += pad;
    uint8_t rec[640];
    size_t h = ro__varint_put(rec, p);
    memcpy(rec + h, payload, p);
    ro__traj_put_le32(rec + h + p, ro__crc32c(0, payload, p));
    size_t rlen = h + p + RO_TRAJ_CRC_BYTES, blen;
    uint8_t *bad = insert_bytes(data, len, ends[3], rec, rlen, &blen);
    ro_traj_reader_t r;
    char err[ERRLEN];
    assert_int_equal(ro__traj_reader_open(&r, bad, blen, true, err, sizeof err), 0);
    seen_t s;
    read_events(&r, &s);
    ro__traj_reader_close(&r);
    /* The first resync is where the outer record ends: record 4's place. */
    assert_int_equal(s.first_resync_off, ends[3] + rlen);
    assert_int_equal(s.last_record, N);
    free(bad);
    free(data);
}

static int open_file(const char *name, const uint8_t *data, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

/* Through pread and a window: what memory gives, also when the damage is
 * longer than a window. */
static void test_file_input_matches_memory(void **state)
{
    (void)state;
    enum { N = 30000, DAMAGE = 3 << 20 };
    static size_t ends[N + 1];
    size_t len, blen;
    uint8_t *data = file_of(N, 4096, &len, ends);
    uint8_t *damage = crafted_damage(DAMAGE);
    uint8_t *bad = insert_bytes(data, len, ends[N / 2], damage, DAMAGE, &blen);
    ro_traj_reader_t r;
    char err[ERRLEN];
    seen_t from_mem, from_fd;
    assert_int_equal(ro__traj_reader_open(&r, bad, blen, true, err, sizeof err), 0);
    read_events(&r, &from_mem);
    ro__traj_reader_close(&r);
    int fd = open_file("bad.traj", bad, blen);
    crc_bytes = 0;
    assert_int_equal(ro__traj_reader_open_fd(&r, fd, true, err, sizeof err), 0);
    assert_true(r.buf_cap < blen); /* a window, not the whole file */
    read_events(&r, &from_fd);
    ro__traj_reader_close(&r);
    close(fd);
    print_message("through a window over %d crafted bytes in a %zu-byte file: %llu CRC bytes\n",
                  DAMAGE, blen, (unsigned long long)crc_bytes);
    assert_true(crc_bytes <= crc_bound(blen, DAMAGE));
    assert_int_equal(from_fd.batches, from_mem.batches);
    assert_int_equal(from_fd.corrupt, from_mem.corrupt);
    assert_int_equal(from_fd.resynced, from_mem.resynced);
    assert_int_equal(from_fd.first_resync_off, from_mem.first_resync_off);
    assert_int_equal(from_fd.last_record, N);
    free(bad);
    free(damage);
    free(data);
}

/* A file cut while it is read: RO_TRAJ_SHRANK (an error, not SIGBUS), and
 * every complete record before the cut. */
static void test_file_cut_while_read(void **state)
{
    (void)state;
    enum { N = 40000 };
    static size_t ends[N + 1];
    size_t len;
    uint8_t *data = file_of(N, 4096, &len, ends);
    int fd = open_file("cut.traj", data, len);
    ro_traj_reader_t r;
    char err[ERRLEN];
    assert_int_equal(ro__traj_reader_open_fd(&r, fd, true, err, sizeof err), 0);
    size_t cut = len / 2 + 7; /* inside a record, past the first window */
    char path[128];           /* fd is read-only: cut the file by its path */
    snprintf(path, sizeof path, "%s/cut.traj", tmpdir);
    assert_int_equal(truncate(path, (off_t)cut), 0);
    seen_t s;
    read_events(&r, &s);
    ro__traj_reader_close(&r);
    close(fd);
    uint32_t whole = 0;
    while (whole < N && ends[whole + 1] <= cut)
        whole++;
    assert_int_equal(s.batches, whole);
    assert_int_equal(s.shrank, 1);
    assert_int_equal(s.corrupt + s.cut_short, 0);
    char want[128];
    snprintf(want, sizeof want, "the file shrank from %zu to %zu bytes while it was read", len,
             cut);
    assert_non_null(strstr(s.last_msg, want));
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crafted_damage_costs_linear_crc_work),
        cmocka_unit_test(test_crc_valid_invalid_record_is_skipped_whole),
        cmocka_unit_test(test_file_input_matches_memory),
        cmocka_unit_test(test_file_cut_while_read),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
