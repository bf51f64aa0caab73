/*
 * The weights file on disk (src/policy/params_file.c): a saved policy loads
 * back bit for bit and saves to the same bytes, atomically (no temporary
 * file left, mode 0644); save and load errors name the file (a missing
 * directory, a file over the size limit, a directory, a missing file).
 * Loading holds nothing but the weights: a 64 MiB file of empty layers is
 * refused holding a few KiB, a 32 MiB weights file takes its weights and
 * little more (peak RSS read from /proc, reset through clear_refs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/params.h"
#include "policy_fixture.h"
#include "runtime/error.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("params_files");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

static const float lo2[2] = {-1.0f, -1.0f}, hi2[2] = {1.0f, 1.0f};

/* act_for: the test model's action space, 3 discrete actions or a box of 2. */
static ro_space_t act_for(int box)
{
    return box ? act_box(2, lo2, hi2) : act_discrete(3);
}

/* count_temp_files counts what save's temporary files would be called. */
static int count_temp_files(void)
{
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *b = malloc(1 << 20);
    *len = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

static void round_trip(int box, ro_activation_t actv)
{
    ro_space_t obs = obs_box(4), act = act_for(box);
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP,
                             .hidden = {64, 32, 16},
                             .nhidden = 3,
                             .activation = actv,
                             .seed = 99};
    ro_policy_t *a = NULL, *b = NULL;
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_new(&a, &spec, &obs, &act, err, sizeof err), 0);
    const char *p1 = tmp_path("rt1.pb");
    char path1[128];
    snprintf(path1, sizeof path1, "%s", p1);
    assert_int_equal(ro__policy_save(a, path1, err, sizeof err), 0);
    assert_int_equal(count_temp_files(), 0);
    struct stat st;
    assert_int_equal(stat(path1, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    ro_policy_spec_t ls = {.kind = RO_POLICY_MLP, .params_path = path1};
    if (ro__policy_new(&b, &ls, &obs, &act, err, sizeof err))
        fail_msg("%s", err);

    ro_policy_ws_t *wa, *wb;
    assert_int_equal(ro__policy_ws_new(&wa, a, 50), 0);
    assert_int_equal(ro__policy_ws_new(&wb, b, 50), 0);
    for (int i = 0; i < 200; i++)
        ro__policy_ws_input(wa)[i] = ro__policy_ws_input(wb)[i] = sinf((float)i) * 2.0f;
    float oa[150], ob[150];
    ro__policy_forward(a, wa, 50, oa, NULL);
    ro__policy_forward(b, wb, 50, ob, NULL);
    assert_memory_equal(oa, ob, 50 * ro__policy_act_dim(a) * (box ? 1 : 3) * sizeof(float));

    /* Saving the loaded policy writes the same bytes, over the old file. */
    const char *p2 = tmp_path("rt2.pb");
    assert_int_equal(ro__policy_save(b, p2, err, sizeof err), 0);
    assert_int_equal(ro__policy_save(b, p2, err, sizeof err), 0);
    size_t n1, n2;
    uint8_t *b1 = slurp(path1, &n1), *b2 = slurp(p2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    free(b1);
    free(b2);
    ro__policy_ws_free(wa);
    ro__policy_ws_free(wb);
    ro__policy_free(a);
    ro__policy_free(b);
}

static void test_round_trip(void **state)
{
    (void)state;
    round_trip(0, RO_ACT_TANH);
    round_trip(1, RO_ACT_TANH);
    round_trip(1, RO_ACT_RELU);
}

static void test_save_errors(void **state)
{
    (void)state;
    ro_policy_params_t pp = {.activation = RO_ACT_TANH,
                             .obs_dim = 1,
                             .action_kind = RO_SPACE_DISCRETE,
                             .action_dim = 1,
                             .nlayers = 1};
    pp.layers[0].in = 1;
    pp.layers[0].out = 1;
    assert_int_equal(ro__policy_params_alloc(&pp), 0);
    pp.layers[0].weight[0] = 1.0f;
    pp.layers[0].bias[0] = 0.0f;
    char err[ERRLEN] = "";
    int rc = ro__policy_params_save(&pp, "/nonexistent-dir-ro/x.pb", err, sizeof err);
    assert_int_equal(rc, RO_EIO);
    assert_non_null(strstr(err, "/nonexistent-dir-ro/x.pb"));
    /* A file with no hidden layer (a linear policy) is fine. */
    assert_int_equal(ro__policy_params_save(&pp, tmp_path("lin.pb"), err, sizeof err), 0);
    ro__policy_params_free(&pp);
    ro_space_t obs = obs_box(1), act = {.kind = RO_SPACE_DISCRETE, .n = 1};
    assert_int_equal(ro__policy_params_load(&pp, tmp_path("lin.pb"), &obs, &act, err, sizeof err),
                     0);
    ro__policy_params_free(&pp);
}

static void test_file_errors(void **state)
{
    (void)state;
    ro_space_t obs = obs_box(4), act = act_for(0);
    ro_policy_params_t pp;
    char err[ERRLEN] = "";
    /* Over the size limit: a sparse file, checked before it is read. */
    const char *big = tmp_path("big.pb");
    int fd = open(big, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)RO_POLICY_FILE_MAX + 1), 0);
    close(fd);
    assert_int_equal(ro__policy_params_load(&pp, big, &obs, &act, err, sizeof err), RO_ERANGE);
    assert_non_null(strstr(err, "over the 256 MiB limit"));
    unlink(big);
    /* A directory, and a missing file. */
    assert_int_equal(ro__policy_params_load(&pp, tmpdir, &obs, &act, err, sizeof err), RO_EIO);
    assert_non_null(strstr(err, "not a regular file"));
    assert_int_equal(
        ro__policy_params_load(&pp, tmp_path("missing.pb"), &obs, &act, err, sizeof err),
        RO_ENOENT);
    assert_non_null(strstr(err, "missing.pb"));
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1 /* shadow memory and quarantines: RSS says nothing here */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

/* The peak RSS since reset_peak(), KiB (VmHWM). */
static long peak_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

/* Resets the peak to the current RSS (Linux >= 4.0); false if not allowed. */
static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* A file of one PolicyParams whose body is head (hlen bytes), then n bytes
 * of `unit` repeated, written a chunk at a time (no copy held). */
static const char *write_repeated(const char *name, const uint8_t *head, size_t hlen,
                                  const uint8_t *unit, size_t ulen, size_t n)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t prefix[10];
    size_t k = 0;
    uint64_t v = hlen + n;
    while (v >= 0x80) {
        prefix[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    prefix[k++] = (uint8_t)v;
    assert_int_equal(fwrite(prefix, 1, k, f), k);
    if (hlen)
        assert_int_equal(fwrite(head, 1, hlen, f), hlen);
    static uint8_t chunk[1 << 16];
    size_t per = sizeof chunk / ulen * ulen;
    for (size_t i = 0; i < per; i++)
        chunk[i] = unit[i % ulen];
    for (size_t done = 0; done < n; done += per) {
        size_t w = n - done < per ? n - done : per;
        assert_int_equal(fwrite(chunk, 1, w, f), w);
    }
    fclose(f);
    return path;
}

/* 64 MiB of empty layers decoded into 2.97 GB once: now refused from the
 * count, holding no more than a read buffer. */
static void test_empty_layers_cost_nothing(void **state)
{
    (void)state;
    /* format_version 1, "tanh", obs_dim 4, "discrete", action_dim 3 */
    static const uint8_t head[] = {0x08, 1,   0x12, 4,   't', 'a', 'n', 'h', 0x18, 4,    0x22,
                                   8,    'd', 'i',  's', 'c', 'r', 'e', 't', 'e',  0x28, 3};
    static const uint8_t empty_layer[2] = {(6 << 3) | 2, 0};
    const char *path = write_repeated("layers.pb", head, sizeof head, empty_layer, 2, 64u << 20);
    ro_space_t obs = obs_box(4), act = act_for(0);
    ro_policy_params_t pp;
    char err[ERRLEN] = "";
    bool peak = reset_peak();
    long before = peak_kib();
    assert_int_equal(ro__policy_params_load(&pp, path, &obs, &act, err, sizeof err), RO_EBADMSG);
    long grown = peak_kib() - before;
    if (!strstr(err, "has 10 layers or more; expected 1..9"))
        fail_msg("%s", err);
    print_message("64 MiB of empty layers: peak RSS +%ld KiB while loading\n", grown);
#ifndef SANITIZED
    if (peak)
        assert_true(grown < 16 << 10);
#endif
    (void)peak;
    (void)grown;
    unlink(path);
}

/* A tensor given twice would be merged by protobuf: refused, named. */
static void test_tensor_twice_refused(void **state)
{
    (void)state;
    /* layers { weight { shape: 1 } weight { shape: 1 } } */
    static const uint8_t body[] = {0x08, 1, (6 << 3) | 2, 8, 0x0a, 2, 0x08, 1, 0x0a, 2, 0x08, 1};
    const char *path = write_repeated("twice.pb", NULL, 0, body, sizeof body, sizeof body);
    ro_space_t obs = obs_box(4), act = act_for(0);
    ro_policy_params_t pp;
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_params_load(&pp, path, &obs, &act, err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "layers[0].weight appears twice"));
}

/* A 32 MiB weights file: loading takes its weights and little else (it
 * used to hold the file, its decoded copy and the weights at once). */
static void test_large_file_holds_only_its_weights(void **state)
{
    (void)state;
    ro_policy_params_t big;
    memset(&big, 0, sizeof big);
    big.activation = RO_ACT_TANH;
    big.obs_dim = 4096;
    big.action_kind = RO_SPACE_DISCRETE;
    big.action_dim = 3;
    big.nlayers = 2;
    big.layers[0].in = 4096;
    big.layers[0].out = 2048;
    big.layers[1].in = 2048;
    big.layers[1].out = 3;
    assert_int_equal(ro__policy_params_alloc(&big), 0);
    size_t nw = (size_t)4096 * 2048 + 2048 + 2048 * 3 + 3;
    float *w = big.layers[0].weight; /* the four arrays, back to back */
    for (size_t i = 0; i < nw; i++)
        w[i] = (float)(i % 1000) * 1e-3f;
    const char *path = tmp_path("big_weights.pb");
    char err[ERRLEN] = "";
    assert_int_equal(ro__policy_params_save(&big, path, err, sizeof err), 0);
    ro__policy_params_free(&big);
    ro_space_t obs = obs_box(4096), act = act_for(0);
    ro_policy_params_t pp;
    long base = rss_kib();
    bool peak = reset_peak();
    long before = peak_kib();
    if (ro__policy_params_load(&pp, path, &obs, &act, err, sizeof err) != 0)
        fail_msg("%s", err);
    long grown = peak_kib() - before, weights = (long)(nw * sizeof(float) >> 10);
    print_message("a %ld KiB weights file: peak RSS +%ld KiB while loading (RSS was %ld KiB)\n",
                  weights, grown, base);
#ifndef SANITIZED
    if (peak)
        assert_true(grown < weights + (8 << 10));
#endif
    (void)peak;
    (void)grown;
    assert_true(pp.layers[0].weight[999] == (float)999 * 1e-3f);
    assert_true(pp.layers[1].bias[2] == (float)((nw - 1) % 1000) * 1e-3f);
    ro__policy_params_free(&pp);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_save_errors),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_empty_layers_cost_nothing),
        cmocka_unit_test(test_tensor_twice_refused),
        cmocka_unit_test(test_large_file_holds_only_its_weights),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
