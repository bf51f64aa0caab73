/*
 * rollout-replay's flags (the one flag parser, runtime/flags.h).
 */
#ifndef RO_REPLAY_CLI_H
#define RO_REPLAY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "replay/replay.h"

typedef struct ro_replay_cfg {
    ro_replay_opts_t o;
    const char *serve;      /* --serve HOST:PORT, or NULL */
    const char *token_file; /* --serve: the token learners must present, or NULL */
    double hello_timeout;   /* --serve: seconds a connection may take to say hello */
    /* --fork STEP (fork.h): with --policy, --steps, --record and --seed. */
    bool fork_set;
    uint64_t fork_step;
    const char *policy, *record;
    uint64_t steps;
    bool seed_set;
    uint64_t seed;
    bool bisect; /* --bisect A B (bisect.h) */
    int files;   /* index in argv of the first trajectory file */
    bool help, version;
} ro_replay_cfg_t;

/* ro__replay_cfg_parse parses argv (strings point into it). On a bad flag
 * or value, or a missing mode or file, returns RO_EINVAL with one line in
 * err. */
int ro__replay_cfg_parse(ro_replay_cfg_t *c, int argc, char **argv, char *err, size_t errlen);

void ro__replay_usage(FILE *f);

#endif
