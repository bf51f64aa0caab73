/* The --tensorboard and --prometheus outputs (src/metrics/exporters.c):
 * nothing opened when neither is asked for; both opened, an event written
 * with ro__exporters_tb_write and the endpoint bound; a bad endpoint
 * address closes the event file opened before it and names the flag; a
 * bad directory names its flag. What the node and the learner put in them
 * is tested by tests/integration/test_metrics.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/exporters.h"
#include "runtime/error.h"

static void render(void *ctx, FILE *out)
{
    (void)ctx;
    fputs("x 1\n", out);
}

/* Closes the loop after the endpoint's handles have closed. */
static void close_loop(uv_loop_t *loop)
{
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

static void test_none_asked(void **state)
{
    (void)state;
    ro_exporters_t x;
    char err[256] = "";
    assert_int_equal(
        ro__exporters_open(&x, NULL, NULL, NULL, "test", render, NULL, err, sizeof err), 0);
    assert_false(x.tb_on);
    assert_false(x.prom_on);
    assert_null(ro__exporters_tb(&x));
    assert_int_equal(ro__exporters_close(&x), 0);
}

static void test_both(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char dir[] = "/tmp/ro_exp_XXXXXX";
    assert_non_null(mkdtemp(dir));
    ro_exporters_t x;
    char err[256] = "";
    assert_int_equal(
        ro__exporters_open(&x, &loop, dir, "127.0.0.1:0", "test", render, NULL, err, sizeof err),
        0);
    assert_true(x.tb_on && x.prom_on);
    assert_non_null(strstr(x.http.bound, "127.0.0.1:"));
    ro_tb_writer_t *w = ro__exporters_tb(&x);
    assert_ptr_equal(w, &x.tb);
    ro__tb_scalar(w, "test/value", 2.5);
    ro__exporters_tb_write(&x, 7);
    assert_int_equal(x.tb_rc, 0);
    assert_int_equal(x.tb.events, 2); /* file_version, then ours */
    char path[sizeof x.tb.path];
    snprintf(path, sizeof path, "%s", x.tb.path);
    assert_int_equal(ro__exporters_close(&x), 0);
    assert_false(x.tb_on || x.prom_on);
    assert_int_equal(ro__exporters_close(&x), 0); /* again: harmless */
    close_loop(&loop);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_bad_address_closes_the_file(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char dir[] = "/tmp/ro_exp_XXXXXX";
    assert_non_null(mkdtemp(dir));
    ro_exporters_t x;
    char err[256] = "";
    assert_true(
        ro__exporters_open(&x, &loop, dir, "no-port", "test", render, NULL, err, sizeof err) < 0);
    assert_non_null(strstr(err, "--prometheus"));
    assert_false(x.tb_on || x.prom_on);
    close_loop(&loop);
    /* The event file it had made stays, closed: the one entry of dir. */
    DIR *d = opendir(dir);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        assert_non_null(strstr(e->d_name, "events.out.tfevents."));
        char path[300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        assert_int_equal(unlink(path), 0);
        files++;
    }
    closedir(d);
    assert_int_equal(files, 1);
    assert_int_equal(rmdir(dir), 0);
}

static void test_bad_directory(void **state)
{
    (void)state;
    char file[] = "/tmp/ro_exp_file_XXXXXX";
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    close(fd);
    ro_exporters_t x;
    char err[256] = "";
    assert_true(ro__exporters_open(&x, NULL, file, NULL, "test", render, NULL, err, sizeof err) <
                0);
    assert_non_null(strstr(err, "--tensorboard"));
    assert_false(x.tb_on || x.prom_on);
    unlink(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_asked),
        cmocka_unit_test(test_both),
        cmocka_unit_test(test_bad_address_closes_the_file),
        cmocka_unit_test(test_bad_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
