/*
 * A scratch directory for a cmocka test group: made by the group's setup,
 * removed with its contents by the teardown. Include once per test file.
 */
#ifndef RO_TEST_TMPDIR_FIXTURE_H
#define RO_TEST_TMPDIR_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

static char tmpdir[64];

/* mkdtemp /tmp/ro_test_<name>_XXXXXX into tmpdir. 0, or -1. */
static int tmpdir_create(const char *name)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ro_test_%s_XXXXXX", name);
    return mkdtemp(tmpdir) ? 0 : -1;
}

/* rm -rf tmpdir (the name is ours: no quoting to worry about). 0, or -1. */
static int tmpdir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
