#include "learner/cli.h"

#include <stddef.h>
#include <string.h>

#include "policy/policy_flags.h"
#include "runtime/error.h"
#include "runtime/flags.h"
#include "wire/frame.h"

/* --connect HOST:PORT, repeatable. field: the config. */
static int parse_connect(void *field, const char *value, char *err, size_t errlen)
{
    ro_learner_cfg_t *c = field;
    if (c->nconnect == RO_LEARNER_MAX_NODES)
        return ro__errorf(err, errlen, RO_EINVAL, "--connect: at most %d nodes",
                          RO_LEARNER_MAX_NODES);
    c->connect[c->nconnect++] = value;
    return 0;
}

#define AT(field) offsetof(ro_learner_cfg_t, field)

static const ro_flag_t learner_flags[] = {
    {RO_FLAG_FN, "connect", "HOST:PORT", 0, .parse = parse_connect,
     .help = "a node to serve (repeatable, up to 64); unix:PATH\nfor a node's Unix-domain socket"},
    {RO_FLAG_STRING, "token-file", "FILE", AT(token_file), .help = "the nodes' shared secret"},
    {RO_FLAG_FN, "policy", "random|mlp|FILE", AT(policy), .parse = ro__flag_policy,
     .help = "random actions, a seeded MLP (default), or a\nPolicyParams file"},
    RO_POLICY_MODEL_FLAGS(AT(policy)),
    {RO_FLAG_FN, "gemm", "exact|openblas", AT(policy), .parse = ro__flag_gemm,
     .help = "dense-layer kernel (default exact)"},
    {RO_FLAG_U32, "workers", "W", AT(workers), 0, 1024,
     .help = "forward-pass threads, pinned; the learner runs 1 loop\nthread + W. 0: the loop "
             "thread runs them (no\nhand-off). Default: chosen at the first welcome, 0\nif a "
             "forward pass costs less than a hand-off, else\none per CPU but the loop's"},
    {RO_FLAG_U32, "spin-us", "US", AT(spin_us), 0, 100000,
     .help = "after answering, keep the loop polling up to US for\nthe next observations "
             "instead of sleeping\n(adaptive: after 8 spins in a row ran out, the\nnext 256 "
             "waits sleep; default 50 with --workers 0,\nelse 0)"},
    {RO_FLAG_BOOL, "overcommit", NULL, AT(overcommit),
     .help = "allow more workers than allowed CPUs"},
    {RO_FLAG_U32, "batch", "B", AT(batch), 1, 1u << 20,
     .help = "envs per forward pass (default 1024): whole frames\nare taken until this many envs"},
    {RO_FLAG_U64, "max-wait-us", "US", AT(max_wait_us), 0, 60000000,
     .help =
         "wait up to this long for a fuller batch (default 0:\nbatch what one turn of the event "
         "loop brought)"},
    {RO_FLAG_U64, "seed", "S", AT(policy.seed), 0, UINT64_MAX,
     .help = "policy init and action sampling seed (default 1)"},
    {RO_FLAG_U64, "steps", "N", AT(steps), 1, UINT64_MAX / 2,
     .help = "stop after answering N env steps"},
    {RO_FLAG_SECONDS, "seconds", "S", AT(seconds),
     .help = "stop after S seconds (default: run until the nodes stop)"},
    {RO_FLAG_U32, "max-frame-bytes", "N", AT(max_frame), 1024, 1u << 30,
     .help = "largest frame accepted from a node (default 16 MiB)"},
    {RO_FLAG_SECONDS, "reconnect-s", "S", AT(reconnect_s),
     .help =
         "a node whose connection is lost (no goodbye) is\nreconnected to, with backoff, for up "
         "to S seconds\nwithout a connection, then given up (default 60;\n0: never reconnect)"},
    {RO_FLAG_BOOL, "no-shared-memory", NULL, AT(no_shared_memory),
     .help = "a node at unix:PATH sends everything over the socket:\nstream segments and SEED "
             "observations and actions,\nnot in its memory"},
    {RO_FLAG_BOOL, "no-ring", NULL, AT(no_ring),
     .help = "with a SEED node at unix:PATH, every frame and\nanswer goes on the socket, none "
             "through the frame\nrings in shared memory"},
    {RO_FLAG_BOOL, "no-upgrade", NULL, AT(no_upgrade),
     .help = "stay on TCP with a node on this host (by default the\nlearner moves to the node's "
             "private Unix-domain\nsocket and shared memory once the node has proven\nthe host "
             "is the same: docs/protocol.md)"},
    {RO_FLAG_STRING, "name", "NAME", AT(name), .help = "shown in the nodes' logs"},
    {RO_FLAG_STRING, "push-policy", "FILE", AT(push_policy),
     .help = "instead of serving envs, push these weights (a\nPolicyParams file) to nodes running "
             "their own learner\nlanes with --listen, and exit when all accepted them"},
    {RO_FLAG_STRING, "tensorboard", "DIR", AT(tensorboard),
     .help = "TensorBoard event files: steps/s, batch sizes,\nepisodes, spin hits, per "
             "--metrics-interval\n(docs/operations.md)"},
    {RO_FLAG_STRING, "prometheus", "HOST:PORT", AT(prometheus),
     .help = "serve Prometheus metrics at http://HOST:PORT/metrics\n(read-only; unix:PATH a "
             "Unix-domain socket; port 0\npicks a free one)"},
    {RO_FLAG_SECONDS, "metrics-interval", "S", AT(metrics_interval), 10,
     .help = "seconds between TensorBoard events (default 1)"},
    {RO_FLAG_BOOL, "json", NULL, AT(json), .help = "one-line JSON summary on stdout"},
    {RO_FLAG_BOOL, "quiet", NULL, AT(quiet), .help = "no progress lines"},
    RO_FLAGS_HELP_VERSION(ro_learner_cfg_t),
};

#define NFLAGS (sizeof learner_flags / sizeof learner_flags[0])

void ro__learner_usage(FILE *f)
{
    ro__flags_usage(f,
                    "usage: rollout-learner --connect HOST:PORT [--connect HOST:PORT ...] "
                    "[options]\n"
                    "\n"
                    "Attaches to rollout-nodes started with --learner remote, batches the\n"
                    "observations of all of them into forward passes, and sends the actions "
                    "back.\n"
                    "\n",
                    learner_flags, NFLAGS);
}

/* Whether the flag called name was given. */
static bool was_given(const bool *given, const char *name)
{
    return ro__flags_given(learner_flags, NFLAGS, given, name);
}

/* Flags that the others given would make meaningless are refused, never
 * ignored: the policy's (policy_flags.h), and with --push-policy every flag
 * of serving envs. */
static int check_combinations(const ro_learner_cfg_t *c, const bool *given, char *err,
                              size_t errlen)
{
    static const char *const serving[] = {
        "policy",     "hidden",      "activation",  "gemm",
        "workers",    "batch",       "max-wait-us", "seed",
        "steps",      "reconnect-s", "overcommit",  "no-shared-memory",
        "spin-us",    "tensorboard", "prometheus",  "metrics-interval",
        "no-upgrade", NULL};
    if (c->push_policy)
        for (const char *const *f = serving; *f; f++)
            if (was_given(given, *f))
                return ro__errorf(err, errlen, RO_EINVAL,
                                  "--%s: --push-policy only pushes weights; it serves no envs", *f);
    if (was_given(given, "metrics-interval") && !c->tensorboard)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--metrics-interval: only with --tensorboard DIR");
    return ro__policy_flags_check(&c->policy, was_given(given, "hidden"),
                                  was_given(given, "activation"), was_given(given, "gemm"), err,
                                  errlen);
}

int ro__learner_cfg_parse(ro_learner_cfg_t *c, int argc, char **argv, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    ro__policy_flags_defaults(&c->policy);
    c->policy.seed = 1;
    c->batch = 1024;
    c->max_frame = RO_WIRE_DEFAULT_MAX_FRAME;
    c->reconnect_s = 60.0;
    c->name = "rollout-learner";
    c->metrics_interval = 1.0;
    bool given[NFLAGS];
    int rc = ro__flags_parse(learner_flags, NFLAGS, c, given, argc, argv, NULL, err, errlen);
    if (rc)
        return rc;
    if (c->help || c->version)
        return 0;
    if (c->nconnect == 0)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "no node to serve: give --connect HOST:PORT (see --help)");
    c->workers_given = was_given(given, "workers");
    c->spin_given = was_given(given, "spin-us");
    /* The loop is the data path only without workers (threads.c may give
     * it workers at the first welcome, and then no spin). */
    if (!c->spin_given)
        c->spin_us = c->workers == 0 ? 50 : 0;
    return check_combinations(c, given, err, errlen);
}
