#include "replay/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/flags.h"

/* Comma-separated integers in [0, max] appended to f (up to
 * RO_REPLAY_MAX_FILTER in all). */
static int parse_list(const char *flag, const char *s, uint64_t max, ro_replay_filter_t *f,
                      char *err, size_t errlen)
{
    char buf[1024];
    if (strlen(s) >= sizeof buf || *s == '\0' || s[strlen(s) - 1] == ',')
        goto bad;
    strcpy(buf, s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        if (*t < '0' || *t > '9')
            goto bad;
        unsigned long long v = strtoull(t, &end, 10);
        if (errno || *end || v > max || f->n == RO_REPLAY_MAX_FILTER)
            goto bad;
        f->v[f->n++] = v;
    }
    return 0;
bad:
    return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': expected up to %d comma-separated integers",
                      flag, s, RO_REPLAY_MAX_FILTER);
}

static int parse_envs(void *field, const char *value, char *err, size_t errlen)
{
    ro_replay_opts_t *o = field;
    return parse_list("--env", value, UINT32_MAX, &o->envs, err, errlen);
}

/* --episode LIST, or ENV:EPISODE: seek to that env's episode. */
static int parse_episodes(void *field, const char *value, char *err, size_t errlen)
{
    ro_replay_opts_t *o = field;
    const char *colon = strchr(value, ':');
    if (!colon)
        return parse_list("--episode", value, UINT64_MAX, &o->episodes, err, errlen);
    char env[32];
    size_t el = (size_t)(colon - value);
    if (el == 0 || el >= sizeof env || o->envs.n || o->episodes.n || o->episode_seek)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--episode '%s': ENV:EPISODE (one env's episode, alone: no --env or "
                          "other --episode)",
                          value);
    memcpy(env, value, el);
    env[el] = '\0';
    int rc = ro__flag_u64("--episode", env, 0, UINT32_MAX, &o->envs.v[0], err, errlen);
    if (rc == 0)
        rc = ro__flag_u64("--episode", colon + 1, 0, UINT64_MAX, &o->episodes.v[0], err, errlen);
    if (rc)
        return rc;
    o->envs.n = o->episodes.n = 1;
    o->episode_seek = o->from_set = true;
    o->from = 0;
    return 0;
}

/* --no-resync clears the default. */
static int parse_no_resync(void *field, const char *value, char *err, size_t errlen)
{
    (void)value, (void)err, (void)errlen;
    *(bool *)field = false;
    return 0;
}

#define AT(field) offsetof(ro_replay_cfg_t, field)

static const ro_flag_t replay_flags[] = {
    {.kind = RO_FLAG_SECTION, .name = "modes (one or more)"},
    {RO_FLAG_BOOL, "verify", NULL, AT(o.verify),
     .help = "re-create every env from the header, re-step it with\nthe recorded actions and "
             "compare every observation,\nreward and flag bit for bit; report the first "
             "divergence"},
    {RO_FLAG_BOOL, "dump", NULL, AT(o.dump), .help = "one JSON object per entry on stdout"},
    {RO_FLAG_BOOL, "stats", NULL, AT(o.stats),
     .help = "episodes, return and length per env and overall (JSON)"},
    {RO_FLAG_STRING, "serve", "HOST:PORT", AT(serve),
     .help = "act as a node for one learner (docs/protocol.md):\nstream the recorded "
             "observations in order and count\nthe learner's actions that differ from the "
             "recorded ones"},
    {RO_FLAG_U64, "fork", "STEP", AT(fork_step), 0, UINT64_MAX,
     .help = "replay to step STEP (from snapshots), then go on\nwith --policy for --steps "
             "steps, writing the new\ntransitions to --record OUT (either env ABI)"},
    {RO_FLAG_BOOL, "bisect", NULL, AT(bisect),
     .help = "A.traj [A.traj.1 ...] B.traj [B.traj.1 ...]: the\nfirst step where two "
             "recordings of one seed differ:\nenv, episode, step, field"},
    {.kind = RO_FLAG_SECTION, .name = "options"},
    {RO_FLAG_FN, "env", "LIST", AT(o), .parse = parse_envs,
     .help = "only these env indices (comma-separated, repeatable)"},
    {RO_FLAG_FN, "episode", "LIST", AT(o), .parse = parse_episodes,
     .help = "--dump/--stats: only these episodes; or ENV:EPISODE:\nthat env's episode, "
             "sought from its last snapshot\nbefore it (--verify/--dump)"},
    {RO_FLAG_STRING, "plugin", "PATH", AT(o.plugin),
     .help = "the recording's plugin env, or Python env (gym:ID,\npy:MODULE:CALLABLE); its name "
             "must match the\nheader's: code is loaded only from here, never\nbecause a file "
             "names it"},
    {RO_FLAG_STRING, "token-file", "FILE", AT(token_file),
     .help = "--serve: learners must present this token (required\noff loopback)"},
    {RO_FLAG_SECONDS, "hello-timeout", "S", AT(hello_timeout),
     .help = "--serve: drop a connection that has not said a valid\nhello within S seconds "
             "(default 10; 0: never)"},
    {RO_FLAG_U64, "from", "STEP", AT(o.from), 0, UINT64_MAX,
     .help = "--verify/--dump from step STEP (the recording's\nsteps over all envs): each env "
             "starts from its\nlast snapshot before it (--snapshot-every)"},
    {RO_FLAG_STRING, "policy", "FILE|random", AT(policy),
     .help = "--fork: the policy that goes on (a PolicyParams\nfile, or random)"},
    {RO_FLAG_U64, "steps", "N", AT(steps), 1, UINT64_MAX,
     .help = "--fork: env steps to take, over all forked envs"},
    {RO_FLAG_STRING, "record", "OUT", AT(record), .help = "--fork: the new recording"},
    {RO_FLAG_U64, "seed", "S", AT(seed), 0, UINT64_MAX,
     .help = "--fork: the new actions' seed (default: the\nrecording's)"},
    {RO_FLAG_FN, "env-ids", "LIST", AT(o), .parse = parse_envs,
     .help = "the same as --env (with --fork: the envs to fork)"},
    {RO_FLAG_FN, "no-resync", NULL, AT(o.resync), .parse = parse_no_resync,
     .help = "stop at the first damaged record instead of skipping it"},
    RO_FLAGS_HELP_VERSION(ro_replay_cfg_t),
};

#define NFLAGS (sizeof replay_flags / sizeof replay_flags[0])

void ro__replay_usage(FILE *f)
{
    ro__flags_usage(f,
                    "usage: rollout-replay MODE... [options] FILE...\n"
                    "\n"
                    "Reads trajectory files written by rollout-node --record. Give the parts of a\n"
                    "rotated recording in order: PATH PATH.1 PATH.2 ...\n"
                    "Exit status: 0 ok, 1 divergence or damaged record, 2 usage or unusable "
                    "file.\n"
                    "\n",
                    replay_flags, NFLAGS);
}

int ro__replay_cfg_parse(ro_replay_cfg_t *c, int argc, char **argv, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->o.resync = true;
    c->hello_timeout = 10.0;
    bool given[NFLAGS];
    int rc = ro__flags_parse(replay_flags, NFLAGS, c, given, argc, argv, &c->files, err, errlen);
    if (rc || c->help || c->version)
        return rc;
    /* --episode ENV:EPISODE sets from_set too (from its start). */
    c->o.from_set |= ro__flags_given(replay_flags, NFLAGS, given, "from");
    c->fork_set = ro__flags_given(replay_flags, NFLAGS, given, "fork");
    c->seed_set = ro__flags_given(replay_flags, NFLAGS, given, "seed");
    if (c->serve && (c->o.verify || c->o.dump || c->o.stats || c->o.from_set || c->fork_set ||
                     c->bisect || c->files >= argc))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--serve takes the trajectory files and no other mode (see --help)");
    if (!c->serve && c->token_file)
        return ro__errorf(err, errlen, RO_EINVAL, "--token-file goes with --serve (see --help)");
    bool fork_flags = c->policy || c->record || c->steps || c->seed_set;
    if (c->fork_set && (c->serve || c->bisect || c->o.dump || c->o.stats || c->o.from_set))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--fork replays (as --verify) and forks; it takes no other mode "
                          "and no --from (see --help)");
    if (c->fork_set && (!c->policy || !c->record || !c->steps))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--fork STEP needs --policy FILE|random, --steps N and --record OUT");
    if (!c->fork_set && fork_flags)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--policy, --steps, --record and --seed go with --fork (see --help)");
    if (c->bisect &&
        (c->o.verify || c->o.dump || c->o.stats || c->o.from_set || argc - c->files < 2))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--bisect takes two recordings, A.traj [A.traj.1 ...] B.traj "
                          "[B.traj.1 ...], and no other mode");
    if (c->o.episode_seek && (c->o.envs.n != 1 || c->o.episodes.n != 1))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--episode ENV:EPISODE names one env's episode alone: no --env or "
                          "other --episode with it");
    if (c->fork_set) {
        c->o.verify = true; /* replayed bit for bit up to the step */
        c->o.from_set = true;
        c->o.from = c->fork_step;
        c->o.until_set = true;
        c->o.until = c->fork_step;
    }
    if (!c->serve && !c->bisect && !c->o.verify && !c->o.dump && !c->o.stats)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "nothing to do: give --verify, --dump, --stats, --fork or --bisect "
                          "(see --help)");
    if (c->files >= argc)
        return ro__errorf(err, errlen, RO_EINVAL, "no trajectory file given (see --help)");
    return 0;
}
