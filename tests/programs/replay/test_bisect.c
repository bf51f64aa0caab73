/*
 * rollout-replay --bisect (programs/replay/bisect.c) on recordings the
 * test writes itself (tests/traj_fixture.h: every entry derives from its
 * batch), B the same as A but where the test changed an entry (and, from
 * a given batch on, the env's snapshot state). Two equal recordings, or
 * one that only runs longer, have no difference; a change is named by
 * env, episode, step, the env's step and the field (the action before the
 * reward); of two envs' differences the one with fewer env steps before
 * it wins (ties: the lower env). With snapshots the search starts after
 * the last state both agree on (a difference before it, with states that
 * agree, is not reached), without them from the start (a note says so);
 * rotated recordings are read on across parts. Not two recordings, parts
 * out of order, another run's recording, or a missing file: exit 2 naming
 * it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/bisect.h"
#include "replay/replay_opts.h"
#include "tmpdir_fixture.h"
#include "traj_fixture.h"

#define BATCHES 40
#define SNAP_EVERY 5 /* every env's state after every 5th batch */
#define MAX_FILES 16

/* What B changes: env's entry in batch (its reward + 1, or its action
 * flipped); its snapshot states differ from batch state_from on (-1:
 * never). */
typedef struct change {
    int batch;
    uint32_t env;
    bool action;
    int state_from;
} change_t;

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmpdir, name);
}

/* write_rec writes name: batches 0..nb of make_batch with changes ch
 * applied, snapshots (format 3) if asked, rotated past max_bytes (0:
 * never); returns the parts written. */
static uint32_t write_rec(const char *name, uint32_t nb, uint64_t seed, bool snapshots,
                          const change_t *ch, size_t nch, uint64_t max_bytes)
{
    static char p[256]; /* outlives the writer, as the writer asks */
    static uint64_t started;
    path_of(p, sizeof p, name);
    fixture_file_t f;
    make_header(&f);
    f.hdr.seed = seed;
    f.hdr.start_time_unix_ns = ++started; /* each recording its own */
    if (snapshots) {
        f.hdr.format_version = RO_TRAJ_FORMAT_SNAPSHOTS;
        f.hdr.snapshot_every = SNAP_EVERY;
    }
    ro_traj_writer_t w;
    char err[ERRLEN];
    assert_int_equal(ro__traj_writer_open(&w, p, &f.hdr, max_bytes, err, sizeof err), 0);
    for (uint32_t i = 0; i < nb; i++) {
        batch_data_t d;
        make_batch(&d, i);
        uint8_t state[ENVS][2];
        Rollout__V1__EnvSnapshot snap[ENVS], *sp[ENVS];
        for (size_t c = 0; c < nch; c++)
            if (ch[c].batch == (int)i && ch[c].action)
                d.action[ch[c].env] ^= 1;
            else if (ch[c].batch == (int)i)
                d.reward[ch[c].env] += 1.0f;
        if (snapshots && (i + 1) % SNAP_EVERY == 0) {
            for (uint32_t k = 0; k < ENVS; k++) {
                state[k][0] = (uint8_t)i;
                state[k][1] = 0;
                for (size_t c = 0; c < nch; c++)
                    state[k][1] |=
                        ch[c].env == k && ch[c].state_from >= 0 && ch[c].state_from <= (int)i;
                rollout__v1__env_snapshot__init(&snap[k]);
                snap[k].env = k;
                snap[k].episode = i / 10;
                snap[k].step = i % 10 + 1;
                snap[k].env_steps = i + 1;
                snap[k].state.data = state[k];
                snap[k].state.len = 2;
                sp[k] = &snap[k];
            }
            d.b.snapshots = sp;
            d.b.n_snapshots = ENVS;
        }
        assert_int_equal(ro__traj_writer_append(&w, &d.b, err, sizeof err), 0);
    }
    const uint32_t parts = w.part + 1;
    assert_int_equal(ro__traj_writer_close(&w, err, sizeof err), 0);
    return parts;
}

/* bisect runs --bisect over the files named; its exit status, what it
 * printed in out and log (free both). */
static int bisect(const char *const *names, size_t n, char **out, char **log)
{
    char *paths[MAX_FILES];
    assert_true(n <= MAX_FILES);
    for (size_t i = 0; i < n; i++) {
        paths[i] = malloc(256);
        assert_non_null(paths[i]);
        path_of(paths[i], 256, names[i]);
    }
    size_t ol, ll;
    FILE *o = open_memstream(out, &ol), *l = open_memstream(log, &ll);
    assert_true(o && l);
    int rc = ro__replay_bisect(paths, n, o, l);
    fclose(o);
    fclose(l);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    return rc;
}

/* expect: --bisect A B exits rc, its answer out (exactly), and log holds
 * note (NULL: nothing logged). */
static void expect(const char *a, const char *b, int rc, const char *out, const char *note)
{
    char *o, *l;
    const char *names[2] = {a, b};
    assert_int_equal(bisect(names, 2, &o, &l), rc);
    assert_string_equal(o, out);
    if (note)
        assert_non_null(strstr(l, note));
    else
        assert_string_equal(l, "");
    free(o);
    free(l);
}

static int group_setup(void **state)
{
    (void)state;
    return tmpdir_create("bisect");
}

static int group_teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

/* Equal recordings, and one that only runs longer: no difference. */
static void test_no_difference(void **state)
{
    (void)state;
    write_rec("same_a.traj", BATCHES, 42, true, NULL, 0, 0);
    write_rec("same_b.traj", BATCHES, 42, true, NULL, 0, 0);
    write_rec("short_b.traj", 30, 42, true, NULL, 0, 0);
    char want[600];
    snprintf(want, sizeof want,
             "no difference: every env's entries are the same in %s/same_a.traj and "
             "%s/same_b.traj\n",
             tmpdir, tmpdir);
    expect("same_a.traj", "same_b.traj", RO_REPLAY_OK, want, NULL);
    snprintf(want, sizeof want,
             "no difference: every env's entries are the same in %s/same_a.traj and "
             "%s/short_b.traj\n",
             tmpdir, tmpdir);
    expect("same_a.traj", "short_b.traj", RO_REPLAY_OK, want, NULL);
}

/* A changed reward is named by env, episode, step, the env's step and
 * both values; an action changed in the same entry is named first. */
static void test_first_difference_named(void **state)
{
    (void)state;
    write_rec("a.traj", BATCHES, 42, true, NULL, 0, 0);
    const change_t reward = {.batch = 17, .env = 2, .state_from = 17};
    write_rec("reward.traj", BATCHES, 42, true, &reward, 1, 0);
    expect("a.traj", "reward.traj", RO_REPLAY_FAILED,
           "first difference: env 2, episode 1, step 8 (the env's step 18): reward[0]: A 17.5 "
           "(0x418c0000), B 18.5 (0x41940000)\n",
           NULL);
    const change_t both[2] = {reward, {.batch = 17, .env = 2, .action = true, .state_from = 17}};
    write_rec("action.traj", BATCHES, 42, true, both, 2, 0);
    expect("a.traj", "action.traj", RO_REPLAY_FAILED,
           "first difference: env 2, episode 1, step 8 (the env's step 18): action[0] (agent 0): "
           "A 1, B 0\n",
           NULL);
}

/* Of several envs' differences the one with the fewest env steps before
 * it is the answer; at a tie, the lower env. */
static void test_fewest_steps_wins(void **state)
{
    (void)state;
    write_rec("a2.traj", BATCHES, 42, true, NULL, 0, 0);
    const change_t two[2] = {{.batch = 20, .env = 1, .state_from = 20},
                             {.batch = 12, .env = 3, .state_from = 12}};
    write_rec("two.traj", BATCHES, 42, true, two, 2, 0);
    expect("a2.traj", "two.traj", RO_REPLAY_FAILED,
           "first difference: env 3, episode 1, step 3 (the env's step 13): reward[0]: A 12.75 "
           "(0x414c0000), B 13.75 (0x415c0000)\n",
           NULL);
    const change_t tie[2] = {{.batch = 12, .env = 3, .state_from = 12},
                             {.batch = 12, .env = 1, .state_from = 12}};
    write_rec("tie.traj", BATCHES, 42, true, tie, 2, 0);
    expect("a2.traj", "tie.traj", RO_REPLAY_FAILED,
           "first difference: env 1, episode 1, step 3 (the env's step 13): reward[0]: A 12.25 "
           "(0x41440000), B 13.25 (0x41540000)\n",
           NULL);
}

/* With snapshots the entries are compared after the last state both
 * agree on: env 0's reward at batch 3, its state unchanged, is behind
 * the snapshots that agree (through batch 9); the answer is batch 13's,
 * from which the states differ. Without snapshots, batch 3's, and a note
 * says why. */
static void test_snapshots_narrow_the_search(void **state)
{
    (void)state;
    const change_t ch[2] = {{.batch = 3, .env = 0, .state_from = -1},
                            {.batch = 13, .env = 0, .state_from = 13}};
    write_rec("snap_a.traj", BATCHES, 42, true, NULL, 0, 0);
    write_rec("snap_b.traj", BATCHES, 42, true, ch, 2, 0);
    expect("snap_a.traj", "snap_b.traj", RO_REPLAY_FAILED,
           "first difference: env 0, episode 1, step 4 (the env's step 14): reward[0]: A 13 "
           "(0x41500000), B 14 (0x41600000)\n",
           NULL);
    write_rec("plain_a.traj", BATCHES, 42, false, NULL, 0, 0);
    write_rec("plain_b.traj", BATCHES, 42, false, ch, 2, 0);
    expect("plain_a.traj", "plain_b.traj", RO_REPLAY_FAILED,
           "first difference: env 0, episode 0, step 4 (the env's step 4): reward[0]: A 3 "
           "(0x40400000), B 4 (0x40800000)\n",
           "its entries are compared from the start");
}

/* Rotated recordings, given as their parts in order: the snapshots of
 * every part are searched and the entries read on across parts. */
static void test_rotated_parts(void **state)
{
    (void)state;
    const change_t ch = {.batch = 33, .env = 0, .state_from = 33};
    const uint32_t pa = write_rec("rot_a.traj", BATCHES, 42, true, NULL, 0, 2048);
    const uint32_t pb = write_rec("rot_b.traj", BATCHES, 42, true, &ch, 1, 2048);
    assert_true(pa >= 2 && pa == pb && pa + pb <= MAX_FILES);
    static char nm[MAX_FILES][32];
    const char *names[MAX_FILES];
    for (uint32_t i = 0; i < pa + pb; i++) {
        const uint32_t k = i < pa ? i : i - pa;
        snprintf(nm[i], sizeof nm[i], k ? "rot_%c.traj.%u" : "rot_%c.traj", i < pa ? 'a' : 'b', k);
        names[i] = nm[i];
    }
    char *o, *l;
    assert_int_equal(bisect(names, pa + pb, &o, &l), RO_REPLAY_FAILED);
    assert_string_equal(o, "first difference: env 0, episode 3, step 4 (the env's step 34): "
                           "reward[0]: A 33 (0x42040000), B 34 (0x42080000)\n");
    free(o);
    free(l);
    /* B's part 1 before its part 0: it is taken for a part of A. */
    const char *wrong[3] = {"rot_a.traj", "rot_b.traj.1", "rot_b.traj"};
    assert_int_equal(bisect(wrong, 3, &o, &l), RO_REPLAY_UNUSABLE);
    assert_non_null(strstr(l, "rot_b.traj.1 is not part 1 of the recording"));
    assert_string_equal(o, "");
    free(o);
    free(l);
}

/* Not two recordings, another run's recording, a file that is not there:
 * exit 2, saying which. */
static void test_unusable(void **state)
{
    (void)state;
    write_rec("u_a.traj", 10, 42, true, NULL, 0, 0);
    write_rec("u_seed.traj", 10, 43, true, NULL, 0, 0);
    char *o, *l;
    const char *one[1] = {"u_a.traj"};
    assert_int_equal(bisect(one, 1, &o, &l), RO_REPLAY_UNUSABLE);
    assert_non_null(strstr(l, "--bisect takes two recordings"));
    assert_non_null(strstr(l, "1 of the files given start one"));
    free(o);
    free(l);
    expect("u_a.traj", "u_seed.traj", RO_REPLAY_UNUSABLE, "",
           "u_seed.traj are not recordings of one run");
    expect("u_a.traj", "missing.traj", RO_REPLAY_UNUSABLE, "", "cannot open");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_difference),
        cmocka_unit_test(test_first_difference_named),
        cmocka_unit_test(test_fewest_steps_wins),
        cmocka_unit_test(test_snapshots_narrow_the_search),
        cmocka_unit_test(test_rotated_parts),
        cmocka_unit_test(test_unusable),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
