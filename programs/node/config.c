/*
 * rollout-node's flags: one table, read by the one flag parser
 * (runtime/flags.h) and printed as --help.
 */
#include "node/config.h"

#include <stddef.h>
#include <string.h>

#include "policy/policy_flags.h"
#include "runtime/error.h"
#include "runtime/flags.h"
#include "runtime/rng.h"
#include "wire/frame.h"

void ro__config_defaults(ro_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->env = "cartpole";
    c->num_envs = 256;
    c->max_wait_us = 1000;
    ro__policy_flags_defaults(&c->policy);
    c->policy_arg = "mlp";
    c->seed = 1; /* replaced by a fresh one from the OS unless --seed is given */
    c->seconds = 10.0;
    c->metrics_interval = 1.0;
    c->max_frame = RO_WIRE_DEFAULT_MAX_FRAME;
    c->max_learners = 64;
    c->learner_timeout = 30.0;
    c->hello_timeout = 10.0;
    c->numa_node = -1;
    c->unroll = 32;
    c->stream_window = 8;
}

/* --env-arg KEY=VALUE, repeatable. field: the config. */
static int parse_env_arg(void *field, const char *value, char *err, size_t errlen)
{
    ro_config_t *c = field;
    char *s = (char *)value; /* argv strings are ours to edit and outlive the node */
    char *eq = strchr(s, '=');
    if (!eq || eq == s)
        return ro__errorf(err, errlen, RO_EINVAL, "--env-arg '%s': expected KEY=VALUE", s);
    if (c->nenv_args == RO_MAX_ENV_ARGS)
        return ro__errorf(err, errlen, RO_EINVAL, "--env-arg: more than %d arguments",
                          RO_MAX_ENV_ARGS);
    *eq = '\0';
    c->env_args[c->nenv_args].key = s;
    c->env_args[c->nenv_args].value = eq + 1;
    c->nenv_args++;
    return 0;
}

/* --policy: the spec, and the flag as given for descriptions. */
static int parse_policy(void *field, const char *value, char *err, size_t errlen)
{
    ro_config_t *c = field;
    c->policy_arg = value;
    return ro__flag_policy(&c->policy, value, err, errlen);
}

static int parse_numa_node(void *field, const char *value, char *err, size_t errlen)
{
    uint32_t v;
    int rc = ro__flag_u32("--numa-node", value, 0, 63, &v, err, errlen);
    if (rc == 0)
        *(int *)field = (int)v;
    return rc;
}

static int parse_record_max_bytes(void *field, const char *value, char *err, size_t errlen)
{
    uint64_t *v = field;
    int rc = ro__flag_u64("--record-max-bytes", value, 0, UINT64_MAX / 2, v, err, errlen);
    if (rc == 0 && *v != 0 && *v < 4096)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--record-max-bytes '%s': expected 0 or at least 4096", value);
    return rc;
}

static const char *const learner_modes[] = {"local", "remote", "stream", NULL};
static const char *const record_full_modes[] = {"block", "drop", NULL};
static const char *const record_error_modes[] = {"stop", "continue", NULL};

#define AT(field) offsetof(ro_config_t, field)

/* The flags, in --help order; indices matter only for `given` below. */
static const ro_flag_t node_flags[] = {
    {.kind = RO_FLAG_SECTION, .name = "env"},
    {RO_FLAG_STRING, "env", "NAME|PATH", AT(env),
     .help = "cartpole (default), pendulum, burn, or a plugin .so;\nMuJoCo: hopper walker2d "
             "half_cheetah ant inverted_pendulum;\nPython: gym:ID, py:MODULE:CALLABLE"},
    {RO_FLAG_FN, "env-arg", "KEY=VALUE", 0, .parse = parse_env_arg,
     .help = "env argument (repeatable); every env accepts\nmax_episode_steps"},
    {RO_FLAG_U32, "num-envs", "N", AT(num_envs), 1, 1u << 20, .help = "envs to run (default 256)"},
    {RO_FLAG_U32, "env-procs", "K", AT(env_procs), 1, 4096,
     .help = "a Python env's worker processes (default: one\nper worker)"},
    {RO_FLAG_U32, "env-timeout", "S", AT(env_timeout_s), 1, 86400,
     .help = "seconds a Python env worker may take for one\nstep before it counts as hung "
             "(default 60)"},
    {RO_FLAG_BOOL, "check-finite", NULL, AT(check_finite),
     .help = "reset and count envs whose observation or reward\nis NaN or infinite"},
    {.kind = RO_FLAG_SECTION, .name = "scheduling"},
    {RO_FLAG_U32, "workers", "W", AT(workers), 0, 1024,
     .help = "worker threads (default: one per allowed CPU; a\n--learner remote node times its "
             "env and takes 0\nwhen workers would save a frame less than a\nhand-off); 0 with "
             "--learner remote: the envs step\non the loop thread (one thread for a SEED-style "
             "node)"},
    {RO_FLAG_BOOL, "overcommit", NULL, AT(overcommit),
     .help = "allow more workers than allowed CPUs"},
    {RO_FLAG_U32, "shard", "K", AT(shard), 1, 1u << 20,
     .help = "envs stepped together by one env actor (default auto)"},
    {RO_FLAG_FN, "numa-node", "N", AT(numa_node), .parse = parse_numa_node,
     .help = "bind CPUs and memory to NUMA node N (as numactl\n--cpunodebind=N --membind=N)"},
    {RO_FLAG_STRING, "topology", "SPEC", AT(topology),
     .help = "declare NUMA nodes over the allowed CPUs, e.g.\n'0:0-3;1:4-7' (also: "
             "ROLLOUT_TOPOLOGY=SPEC)"},
    {RO_FLAG_BOOL, "print-topology", NULL, AT(print_topology),
     .help = "print nodes, CPUs, distances and the worker plan"},
    {.kind = RO_FLAG_SECTION, .name = "policy"},
    {RO_FLAG_FN, "policy", "random|mlp|FILE", 0, .parse = parse_policy,
     .help = "random actions, a seeded MLP (default), or an MLP\nloaded from a PolicyParams file"},
    RO_POLICY_MODEL_FLAGS(AT(policy)),
    {RO_FLAG_FN, "gemm", "exact|openblas", AT(policy), .parse = ro__flag_gemm,
     .help = "dense-layer kernel: exact (default) gives every env\nthe same actions whatever the "
             "batching; openblas\nuses cblas_sgemm, whose rounding depends on the batch"},
    {RO_FLAG_FN, "kernels", "auto|avx512|avx2|scalar", AT(policy), .parse = ro__flag_kernels,
     .help = "instruction set of the exact kernels (default auto:\nthe best this CPU runs); every "
             "one gives the same bits"},
    {RO_FLAG_U32, "batch", "B", AT(batch), 1, 1u << 20,
     .help = "envs per forward pass (default auto)"},
    {RO_FLAG_U64, "max-wait-us", "US", AT(max_wait_us), 0, 60000000,
     .help = "run a partial batch after this wait (default 1000)"},
    {RO_FLAG_STRING, "save-policy", "FILE", AT(save_policy),
     .help = "write the policy's weights as PolicyParams"},
    {.kind = RO_FLAG_SECTION, .name = "remote learners (docs/protocol.md)"},
    {RO_FLAG_CHOICE, "learner", "local|remote|stream", AT(learner), .choices = learner_modes,
     .help =
         "forward passes in this node (default); by learners\nthat attach over TCP (SEED style); "
         "or here, with\nevery transition streamed to learners that attach"},
    {RO_FLAG_U32, "unroll", "T", AT(unroll), 1, 4096,
     .help = "--learner stream: steps per trajectory segment (default 32)"},
    {RO_FLAG_U32, "stream-window", "N", AT(stream_window), 1, 1024,
     .help = "--learner stream: segments a learner may hold\nunacknowledged (default 8)"},
    {RO_FLAG_U64, "max-policy-lag", "K", AT(max_policy_lag), 0, UINT32_MAX,
     .help = "--learner stream: drop (and count) segments whose\noldest action is more than K "
             "policy versions behind\n(default 0: never; a learner's hello may ask)"},
    {RO_FLAG_STRING, "listen", "HOST:PORT", AT(listen),
     .help = "where learners attach (default 127.0.0.1:5555; port 0\npicks a free one; "
             "unix:PATH a Unix-domain socket);\nwith --learner local, where trainers push new "
             "policy\nweights"},
    {RO_FLAG_STRING, "token-file", "FILE", AT(token_file),
     .help = "secret learners must present; required unless loopback"},
    {RO_FLAG_U32, "max-frame-bytes", "N", AT(max_frame), 1024, 1u << 30,
     .help = "largest frame accepted from a learner (default 16 MiB)"},
    {RO_FLAG_U32, "max-learners", "N", AT(max_learners), 1, 4096,
     .help = "learner connections at once (default 64)"},
    {RO_FLAG_SECONDS, "learner-timeout", "S", AT(learner_timeout),
     .help =
         "close a learner that leaves a batch unanswered for S\nseconds; its envs go to another "
         "(default 30; 0: never)"},
    {RO_FLAG_U32, "spin-us", "US", AT(spin_us), 0, 100000,
     .help = "--learner remote: while a learner's actions are due,\nkeep the loop polling up to US "
             "instead of sleeping\n(adaptive: after 8 spins in a row ran out, the next\n256 waits "
             "sleep); pays when the learner has a CPU of\nits own (default 300 with --workers 0, "
             "the loop\nstepping the envs; else 0)"},
    {RO_FLAG_SECONDS, "hello-timeout", "S", AT(hello_timeout),
     .help = "close a connection that has not said a valid hello\nwithin S seconds (default 10; 0: "
             "never)"},
    {.kind = RO_FLAG_SECTION, .name = "run"},
    {RO_FLAG_U64, "seed", "S", AT(seed), 0, UINT64_MAX,
     .help = "run seed (default: a fresh one from the OS each run,\nprinted in the summary; "
             "--seed S repeats a run)"},
    {RO_FLAG_U32, "node-index", "I", AT(node_index), 0, UINT32_MAX,
     .help = "this node's index among nodes started with one --seed\n(default 0); envs seed "
             "from (seed, I, env index)"},
    {RO_FLAG_U64, "steps", "N", AT(steps), 1, UINT64_MAX / 2,
     .help = "total env steps, split evenly over the envs: each takes\n"
             "ceil(N / num_envs), so N rounds up to a multiple of num_envs"},
    {RO_FLAG_SECONDS, "seconds", "S", AT(seconds),
     .help = "stop after S seconds (default 10; 0 = no limit)"},
    {.kind = RO_FLAG_SECTION, .name = "output"},
    {RO_FLAG_STRING, "metrics", "FILE", AT(metrics),
     .help = "JSON lines: throughput and episode means per\ninterval (docs/operations.md)"},
    {RO_FLAG_BOOL, "metrics-episodes", NULL, AT(metrics_episodes),
     .help = "also one --metrics line per finished episode (costs\nsteps/s at millions of "
             "episodes a second)"},
    {RO_FLAG_SECONDS, "metrics-interval", "S", AT(metrics_interval), 10,
     .help = "seconds between throughput lines and TensorBoard\nevents (default 1)"},
    {RO_FLAG_SECONDS, "metrics-every", "S", AT(metrics_interval), 10,
     .help = "throughput lines only, every S seconds (no\nenv-failure lines); each line has its "
             "interval's\nepisodes and mean return"},
    {RO_FLAG_STRING, "tensorboard", "DIR", AT(tensorboard),
     .help = "TensorBoard event files: steps/s, episode return and\nlength (means and histograms), "
             "queues, per\n--metrics-interval (docs/operations.md)"},
    {RO_FLAG_STRING, "prometheus", "HOST:PORT", AT(prometheus),
     .help = "serve Prometheus metrics at http://HOST:PORT/metrics\n(read-only; unix:PATH a "
             "Unix-domain socket; port 0\npicks a free one)"},
    {RO_FLAG_BOOL, "json", NULL, AT(json), .help = "one-line JSON summary on stdout at the end"},
    {RO_FLAG_BOOL, "quiet", NULL, AT(quiet), .help = "no live status line on the terminal"},
    {.kind = RO_FLAG_SECTION, .name = "recording (docs/replay.md)"},
    {RO_FLAG_STRING, "record", "PATH", AT(record),
     .help = "write every transition to a trajectory file"},
    {RO_FLAG_FN, "record-max-bytes", "N", AT(record_max_bytes), .parse = parse_record_max_bytes,
     .help = "start PATH.1, PATH.2, ... when a file would pass N\nbytes (default 0: one file)"},
    {RO_FLAG_U32, "snapshot-every", "K", AT(snapshot_every), 1, UINT32_MAX,
     .help = "also each env's state every K of its steps, and\nan index: rollout-replay "
             "--from, --fork,\n--bisect (docs/replay.md)"},
    {RO_FLAG_CHOICE, "record-full", "block|drop", AT(record_full), .choices = record_full_modes,
     .help = "when the disk falls behind: pause the envs\n(default) or drop and count the steps"},
    {RO_FLAG_CHOICE, "record-error", "stop|continue", AT(record_error),
     .choices = record_error_modes,
     .help = "when a write fails (disk full): stop the run\nand exit 1 (default), or go on "
             "unrecorded; the\nfile keeps every whole record either way"},
    {.kind = RO_FLAG_SECTION, .name = "other"},
    RO_FLAGS_HELP_VERSION(ro_config_t),
};

#define NFLAGS (sizeof node_flags / sizeof node_flags[0])

void ro__config_usage(FILE *f)
{
    ro__flags_usage(f,
                    "usage: rollout-node [options]\n"
                    "\n"
                    "Steps envs on pinned worker threads and batches their observations\n"
                    "through a policy. Runs --seconds (default 10) unless --steps is given.\n"
                    "\n",
                    node_flags, NFLAGS);
}

/* Whether the flag called name was given. */
static bool was_given(const bool *given, const char *name)
{
    return ro__flags_given(node_flags, NFLAGS, given, name);
}

/* The first of names[] (NULL-terminated) that was given, or NULL. */
static const char *first_given(const bool *given, const char *const *names)
{
    for (; *names; names++)
        if (was_given(given, *names))
            return *names;
    return NULL;
}

/*
 * Combinations in which a flag would be ignored are refused: a user who
 * gives a flag means it to act. Returns 0 or RO_EINVAL with one line.
 */
static int check_combinations(const ro_config_t *c, const bool *given, char *err, size_t errlen)
{
    static const char *const policy_flags[] = {"policy",  "hidden",      "activation", "gemm",
                                               "kernels", "save-policy", NULL};
    static const char *const record_flags[] = {"record-max-bytes", "record-full", "record-error",
                                               "snapshot-every", NULL};
    static const char *const metrics_flags[] = {"metrics-interval", "metrics-every",
                                                "metrics-episodes", NULL};
    static const char *const peer_flags[] = {"token-file",      "max-frame-bytes", "max-learners",
                                             "learner-timeout", "hello-timeout",   NULL};
    const char *f;
    bool remote = c->learner == RO_LEARNER_REMOTE;
    if (remote && (f = first_given(given, policy_flags)))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--%s: with --learner remote the learners that attach choose the "
                          "actions; this node runs no policy",
                          f);
    int rc = ro__policy_flags_check(&c->policy, was_given(given, "hidden"),
                                    was_given(given, "activation"), was_given(given, "gemm"), err,
                                    errlen);
    if (rc)
        return rc;
    if (c->policy.kind == RO_POLICY_RANDOM && was_given(given, "kernels"))
        return ro__errorf(err, errlen, RO_EINVAL, "--kernels: --policy random runs no MLP");
    if (c->policy.kind == RO_POLICY_RANDOM && c->save_policy)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--save-policy: --policy random has no weights to save");
    if (!c->record && (f = first_given(given, record_flags)))
        return ro__errorf(err, errlen, RO_EINVAL, "--%s: only with --record PATH", f);
    if (was_given(given, "metrics-episodes") && !c->metrics)
        return ro__errorf(err, errlen, RO_EINVAL, "--metrics-episodes: only with --metrics FILE");
    if (!c->metrics && !c->tensorboard && (f = first_given(given, metrics_flags)))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--%s: only with --metrics FILE or --tensorboard DIR", f);
    if (was_given(given, "metrics-interval") && was_given(given, "metrics-every"))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--metrics-every: give it or --metrics-interval, not both (both set "
                          "the throughput lines' period; --metrics-every also drops the "
                          "env-failure lines)");
    if (was_given(given, "metrics-episodes") && was_given(given, "metrics-every"))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--metrics-episodes: --metrics-every writes throughput lines only");
    if (!remote && !c->listen && (f = first_given(given, peer_flags)))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--%s: nothing connects to this node without --listen or --learner "
                          "remote",
                          f);
    if (was_given(given, "workers") && c->workers == 0 && !remote)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--workers 0: only with --learner remote (the envs then step on the "
                          "loop thread; a local or stream node needs workers for its policy)");
    if (was_given(given, "overcommit") && c->workers == 0)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--overcommit: only with --workers W (the default is one worker per "
                          "allowed CPU)");
    return 0;
}

int ro__config_parse(ro_config_t *c, int argc, char **argv, char *err, size_t errlen)
{
    ro__config_defaults(c);
    bool given[NFLAGS];
    int rc = ro__flags_parse(node_flags, NFLAGS, c, given, argc, argv, NULL, err, errlen);
    if (rc)
        return rc;
    if (!was_given(given, "help") && !was_given(given, "version")) {
        rc = check_combinations(c, given, err, errlen);
        if (rc)
            return rc;
    }
    /* A fresh seed per run, so that two nodes started alike do not play the
     * same episodes; it is printed and recorded, so the run can be repeated. */
    if (!was_given(given, "seed") && !c->help && !c->version && !c->print_topology) {
        rc = ro__random_seed(&c->seed, err, errlen);
        if (rc)
            return rc;
        c->seed_drawn = true;
    }
    c->metrics_throughput_only = was_given(given, "metrics-every");
    c->envs_on_loop = was_given(given, "workers") && c->workers == 0;
    c->workers_given = was_given(given, "workers");
    c->spin_given = was_given(given, "spin-us");
    /* Spinning pays only where the loop thread is the data path: beside
     * busy workers it would take their CPU. 300 us covers a Python
     * learner's turn between a frame and its answer (VecEnv.step() with
     * random actions: 100-200 us); a turn longer than that (a policy's
     * forward pass) runs the spin out 8 times, then the loop sleeps for the
     * next 256 waits (runtime/loop_spin.h). */
    if (!was_given(given, "spin-us"))
        c->spin_us = c->envs_on_loop ? 300 : 0;
    /* --steps alone means "run until the steps are done". */
    if (was_given(given, "steps") && !was_given(given, "seconds"))
        c->seconds = 0;
    return 0;
}
