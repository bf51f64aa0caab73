/* TensorBoard event files (src/metrics/tb_writer.c): TFRecord framing with
 * masked CRC-32C (vectors from TensorBoard's own masked_crc32c), the
 * file_version event first, an interval's scalars and histogram read back
 * through protobuf-c, NaN scalars and empty histograms left out, and a
 * directory that cannot be made named in the error. The integration test
 * (tests/integration/test_metrics.py) reads real runs with the tensorboard
 * package. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/tb_writer.h"
#include "runtime/error.h"
#include "tensorboard.pb-c.h"
#include "trajectory/crc32c.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_framing_vectors(void **state)
{
    (void)state;
    uint8_t hdr[12];
    /* TensorBoard: masked_crc32c(struct.pack('<Q', 5)) == 0x3e04b2ea,
     * masked_crc32c(b'hello') == 0x191c1fbb. */
    uint32_t tail = ro__tb_record_header(hdr, (const uint8_t *)"hello", 5);
    assert_int_equal(hdr[0], 5);
    for (int i = 1; i < 8; i++)
        assert_int_equal(hdr[i], 0);
    assert_int_equal(le32(hdr + 8), 0x3e04b2eau);
    assert_int_equal(tail, 0x191c1fbbu);
}

/* Reads the next record of f; returns its bytes (malloc'd) or NULL at the
 * end; fails on a bad CRC. */
static uint8_t *next_record(FILE *f, size_t *len)
{
    uint8_t hdr[12], tail[4], check[12];
    if (fread(hdr, 1, 12, f) != 12)
        return NULL;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | hdr[i];
    uint8_t *b = malloc(n ? n : 1);
    assert_int_equal(fread(b, 1, n, f), n);
    assert_int_equal(fread(tail, 1, 4, f), 4);
    uint32_t want = ro__tb_record_header(check, b, n);
    assert_memory_equal(check, hdr, 12);
    assert_int_equal(le32(tail), want);
    *len = n;
    return b;
}

static void test_events_read_back(void **state)
{
    (void)state;
    char dir[] = "/tmp/ro_tb_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[300];
    snprintf(sub, sizeof sub, "%s/a/b", dir); /* parents are made */
    ro_tb_writer_t w;
    char err[256] = "";
    assert_int_equal(ro__tb_open(&w, sub, "test", "--tensorboard", err, sizeof err), 0);
    static const double edges[] = {0, 10, 100};
    ro_histo_t h;
    ro__histo_init(&h, edges, 3);
    ro__histo_add(&h, 5);
    ro__histo_add(&h, 7);
    ro__histo_add(&h, 50);
    ro_histo_t empty;
    ro__histo_init(&empty, edges, 3);
    ro__tb_scalar(&w, "rollout/steps_per_s", 1234.5);
    ro__tb_scalar(&w, "rollout/episode_return_mean", NAN); /* left out */
    ro__tb_histo(&w, "rollout/episode_return", &h);
    ro__tb_histo(&w, "rollout/empty", &empty); /* left out */
    assert_int_equal(ro__tb_write(&w, 4096, 1700000000.25), 0);
    assert_int_equal(ro__tb_write(&w, 5000, 1700000001.0), 0); /* nothing queued: no event */
    char path[sizeof w.path];
    snprintf(path, sizeof path, "%s", w.path);
    assert_non_null(strstr(path, "/events.out.tfevents."));
    assert_int_equal(w.events, 2);
    assert_int_equal(ro__tb_close(&w), 0);
    assert_int_equal(ro__tb_close(&w), 0); /* again: harmless */

    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t len;
    uint8_t *b = next_record(f, &len);
    Tensorboard__Event *ev = tensorboard__event__unpack(NULL, len, b);
    assert_non_null(ev);
    assert_int_equal(ev->what_case, TENSORBOARD__EVENT__WHAT_FILE_VERSION);
    assert_string_equal(ev->file_version, "brain.Event:2");
    tensorboard__event__free_unpacked(ev, NULL);
    free(b);
    b = next_record(f, &len);
    ev = tensorboard__event__unpack(NULL, len, b);
    assert_non_null(ev);
    assert_int_equal(ev->step, 4096);
    assert_true(ev->wall_time == 1700000000.25);
    assert_int_equal(ev->what_case, TENSORBOARD__EVENT__WHAT_SUMMARY);
    assert_int_equal(ev->summary->n_value, 2);
    Tensorboard__Summary__Value *v = ev->summary->value[0];
    assert_string_equal(v->tag, "rollout/steps_per_s");
    assert_true(v->simple_value == 1234.5f);
    v = ev->summary->value[1];
    assert_string_equal(v->tag, "rollout/episode_return");
    assert_int_equal(v->value_case, TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO);
    /* The non-empty range: (0, 10] with 2, (10, 100] with 1. */
    assert_int_equal(v->histo->n_bucket, 2);
    assert_true(v->histo->bucket_limit[0] == 10 && v->histo->bucket_limit[1] == 100);
    assert_true(v->histo->bucket[0] == 2 && v->histo->bucket[1] == 1);
    assert_true(v->histo->min == 5 && v->histo->max == 50 && v->histo->num == 3);
    assert_true(v->histo->sum == 62 && v->histo->sum_squares == 25 + 49 + 2500);
    tensorboard__event__free_unpacked(ev, NULL);
    free(b);
    assert_null(next_record(f, &len));
    fclose(f);
    unlink(path);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/a", dir);
    rmdir(sub);
    rmdir(dir);
}

static void test_bad_directory(void **state)
{
    (void)state;
    ro_tb_writer_t w;
    char err[256] = "";
    /* A regular file where the directory should be. */
    char file[] = "/tmp/ro_tb_file_XXXXXX";
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ro__tb_open(&w, file, "test", "--tensorboard", err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "--tensorboard"));
    assert_non_null(strstr(err, "not a directory"));
    char below[300];
    snprintf(below, sizeof below, "%s/sub", file);
    assert_true(ro__tb_open(&w, below, "test", "--tensorboard", err, sizeof err) < 0);
    assert_non_null(strstr(err, "cannot create directory"));
    unlink(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing_vectors),
        cmocka_unit_test(test_events_read_back),
        cmocka_unit_test(test_bad_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
