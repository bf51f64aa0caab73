#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "flags.h"

void ro__config_defaults(ro_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->env = "cartpole";
    c->num_envs = 256;
    c->max_wait_us = 1000;
    c->policy.kind = RO_POLICY_MLP;
    c->policy.hidden[0] = 64;
    c->policy.hidden[1] = 64;
    c->policy.nhidden = 2;
    c->policy.activation = RO_ACT_TANH;
    c->policy_arg = "mlp";
    c->seed = 1;
    c->seconds = 10.0;
    c->metrics_interval = 1.0;
    c->max_frame = 16u << 20;
    c->max_learners = 64;
    c->learner_timeout = 30.0;
    c->hello_timeout = 10.0;
    c->numa_node = -1;
}

void ro__config_usage(FILE *f)
{
    fputs("usage: rollout-node [options]\n"
          "\n"
          "Steps envs on pinned worker threads and batches their observations\n"
          "through a policy. Runs --seconds (default 10) unless --steps is given.\n"
          "\n"
          "env:\n"
          "  --env NAME|PATH         cartpole (default), pendulum, burn, or a plugin .so;\n"
          "                          MuJoCo: hopper walker2d half_cheetah ant inverted_pendulum\n"
          "  --env-arg KEY=VALUE     env argument (repeatable); every env accepts\n"
          "                          max_episode_steps\n"
          "  --num-envs N            envs to run (default 256)\n"
          "  --check-finite          reset and count envs whose observation or reward\n"
          "                          is NaN or infinite\n"
          "scheduling:\n"
          "  --workers W             worker threads (default: one per allowed CPU)\n"
          "  --overcommit            allow more workers than allowed CPUs\n"
          "  --shard K               envs stepped together by one env actor (default auto)\n"
          "  --numa-node N           bind CPUs and memory to NUMA node N (as numactl\n"
          "                          --cpunodebind=N --membind=N)\n"
          "  --topology SPEC         declare NUMA nodes over the allowed CPUs, e.g.\n"
          "                          '0:0-3;1:4-7' (also: ROLLOUT_TOPOLOGY=SPEC)\n"
          "  --print-topology        print nodes, CPUs, distances and the worker plan\n"
          "policy:\n"
          "  --policy random|mlp|FILE  random actions, a seeded MLP (default), or an MLP\n"
          "                          loaded from a PolicyParams file\n"
          "  --hidden H1,H2,...      MLP hidden widths (default 64,64)\n"
          "  --activation tanh|relu  MLP activation (default tanh)\n"
          "  --gemm exact|openblas   dense-layer kernel: exact (default) gives every env\n"
          "                          the same actions whatever the batching; openblas\n"
          "                          uses cblas_sgemm, whose rounding depends on the batch\n"
          "  --batch B               envs per forward pass (default auto)\n"
          "  --max-wait-us US        run a partial batch after this wait (default 1000)\n"
          "  --save-policy FILE      write the policy's weights as PolicyParams\n"
          "remote learners (docs/protocol.md):\n"
          "  --learner local|remote  forward passes in this node (default), or by learners\n"
          "                          that attach over TCP\n"
          "  --listen HOST:PORT      where learners attach (default 127.0.0.1:5555; port 0\n"
          "                          picks a free one); with --learner local, where\n"
          "                          trainers push new policy weights\n"
          "  --token-file FILE       secret learners must present; required unless loopback\n"
          "  --max-frame-bytes N     largest frame accepted from a learner (default 16 MiB)\n"
          "  --max-learners N        learner connections at once (default 64)\n"
          "  --learner-timeout S     close a learner that leaves a batch unanswered for S\n"
          "                          seconds; its envs go to another (default 30; 0: never)\n"
          "  --hello-timeout S       close a connection that has not said a valid hello\n"
          "                          within S seconds (default 10; 0: never)\n"
          "run:\n"
          "  --seed S                run seed (default 1)\n"
          "  --steps N               total env steps, split evenly over the envs\n"
          "  --seconds S             stop after S seconds (default 10; 0 = no limit)\n"
          "output:\n"
          "  --metrics FILE          JSON lines: one per episode, and throughput\n"
          "  --metrics-interval S    seconds between throughput lines (default 1)\n"
          "  --json                  one-line JSON summary on stdout at the end\n"
          "  --quiet                 no live status line on the terminal\n"
          "recording (docs/replay.md):\n"
          "  --record PATH           write every transition to a trajectory file\n"
          "  --record-max-bytes N    start PATH.1, PATH.2, ... when a file would pass N\n"
          "                          bytes (default 0: one file)\n"
          "  --record-full block|drop  when the disk falls behind: pause the envs\n"
          "                          (default) or drop and count the steps\n"
          "  --record-error stop|continue  when a write fails (disk full): stop the run\n"
          "                          and exit 1 (default), or go on unrecorded; the\n"
          "                          file keeps every whole record either way\n"
          "  --help, --version\n",
          f);
}

static int parse_env_arg(ro_config_t *c, char *s, char *err, size_t errlen)
{
    char *eq = strchr(s, '=');
    if (!eq || eq == s) {
        snprintf(err, errlen, "--env-arg '%s': expected KEY=VALUE", s);
        return RO_EINVAL;
    }
    if (c->nenv_args == RO_MAX_ENV_ARGS) {
        snprintf(err, errlen, "--env-arg: more than %d arguments", RO_MAX_ENV_ARGS);
        return RO_EINVAL;
    }
    /* Split in place: argv strings are ours to edit and outlive the node. */
    *eq = '\0';
    c->env_args[c->nenv_args].key = s;
    c->env_args[c->nenv_args].value = eq + 1;
    c->nenv_args++;
    return 0;
}

enum {
    OPT_ENV = 256,
    OPT_ENV_ARG,
    OPT_NUM_ENVS,
    OPT_WORKERS,
    OPT_SHARD,
    OPT_BATCH,
    OPT_MAX_WAIT,
    OPT_POLICY,
    OPT_HIDDEN,
    OPT_ACTIVATION,
    OPT_SAVE_POLICY,
    OPT_GEMM,
    OPT_SEED,
    OPT_STEPS,
    OPT_SECONDS,
    OPT_METRICS,
    OPT_METRICS_INTERVAL,
    OPT_JSON,
    OPT_QUIET,
    OPT_CHECK_FINITE,
    OPT_OVERCOMMIT,
    OPT_LEARNER,
    OPT_LISTEN,
    OPT_TOKEN_FILE,
    OPT_MAX_FRAME,
    OPT_MAX_LEARNERS,
    OPT_LEARNER_TIMEOUT,
    OPT_HELLO_TIMEOUT,
    OPT_NUMA_NODE,
    OPT_TOPOLOGY,
    OPT_PRINT_TOPOLOGY,
    OPT_HELP,
    OPT_VERSION,
    OPT_RECORD,
    OPT_RECORD_MAX_BYTES,
    OPT_RECORD_FULL,
    OPT_RECORD_ERROR,
};

static const struct option long_opts[] = {
    {"env", required_argument, NULL, OPT_ENV},
    {"env-arg", required_argument, NULL, OPT_ENV_ARG},
    {"num-envs", required_argument, NULL, OPT_NUM_ENVS},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"max-wait-us", required_argument, NULL, OPT_MAX_WAIT},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"activation", required_argument, NULL, OPT_ACTIVATION},
    {"save-policy", required_argument, NULL, OPT_SAVE_POLICY},
    {"gemm", required_argument, NULL, OPT_GEMM},
    {"seed", required_argument, NULL, OPT_SEED},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"metrics-interval", required_argument, NULL, OPT_METRICS_INTERVAL},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"check-finite", no_argument, NULL, OPT_CHECK_FINITE},
    {"overcommit", no_argument, NULL, OPT_OVERCOMMIT},
    {"learner", required_argument, NULL, OPT_LEARNER},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"max-frame-bytes", required_argument, NULL, OPT_MAX_FRAME},
    {"max-learners", required_argument, NULL, OPT_MAX_LEARNERS},
    {"learner-timeout", required_argument, NULL, OPT_LEARNER_TIMEOUT},
    {"hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT},
    {"numa-node", required_argument, NULL, OPT_NUMA_NODE},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"print-topology", no_argument, NULL, OPT_PRINT_TOPOLOGY},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {"record", required_argument, NULL, OPT_RECORD},
    {"record-max-bytes", required_argument, NULL, OPT_RECORD_MAX_BYTES},
    {"record-full", required_argument, NULL, OPT_RECORD_FULL},
    {"record-error", required_argument, NULL, OPT_RECORD_ERROR},
    {NULL, 0, NULL, 0},
};

int ro__config_parse(ro_config_t *c, int argc, char **argv, char *err, size_t errlen)
{
    ro__config_defaults(c);
    bool steps_given = false, seconds_given = false;
    optind = 1;
    opterr = 0; /* we print our own one-line messages */
    int opt;
    while ((opt = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
        int rc = 0;
        const char *a = optarg;
        switch (opt) {
        case OPT_ENV:
            if (*a == '\0') {
                snprintf(err, errlen, "--env '': expected cartpole, pendulum, burn or a path");
                return RO_EINVAL;
            }
            c->env = a;
            break;
        case OPT_ENV_ARG:
            rc = parse_env_arg(c, optarg, err, errlen);
            break;
        case OPT_NUM_ENVS:
            rc = ro__flag_u32("--num-envs", a, 1, 1u << 20, &c->num_envs, err, errlen);
            break;
        case OPT_WORKERS:
            rc = ro__flag_u32("--workers", a, 1, 1024, &c->workers, err, errlen);
            break;
        case OPT_SHARD:
            rc = ro__flag_u32("--shard", a, 1, 1u << 20, &c->shard, err, errlen);
            break;
        case OPT_BATCH:
            rc = ro__flag_u32("--batch", a, 1, 1u << 20, &c->batch, err, errlen);
            break;
        case OPT_MAX_WAIT:
            rc = ro__flag_u64("--max-wait-us", a, 0, 60000000, &c->max_wait_us, err, errlen);
            break;
        case OPT_POLICY:
            c->policy_arg = a;
            rc = ro__flag_policy(a, &c->policy, err, errlen);
            break;
        case OPT_HIDDEN:
            rc = ro__flag_hidden(a, &c->policy, err, errlen);
            break;
        case OPT_ACTIVATION:
            rc = ro__flag_activation(a, &c->policy, err, errlen);
            break;
        case OPT_GEMM:
            rc = ro__flag_gemm(a, &c->policy, err, errlen);
            break;
        case OPT_SAVE_POLICY:
            c->save_policy = a;
            break;
        case OPT_SEED:
            rc = ro__flag_u64("--seed", a, 0, UINT64_MAX, &c->seed, err, errlen);
            break;
        case OPT_STEPS:
            rc = ro__flag_u64("--steps", a, 1, UINT64_MAX / 2, &c->steps, err, errlen);
            steps_given = true;
            break;
        case OPT_SECONDS:
            rc = ro__flag_seconds("--seconds", a, &c->seconds, err, errlen);
            seconds_given = true;
            break;
        case OPT_METRICS:
            c->metrics = a;
            break;
        case OPT_METRICS_INTERVAL:
            rc = ro__flag_seconds("--metrics-interval", a, &c->metrics_interval, err, errlen);
            if (rc == 0 && c->metrics_interval < 0.01) {
                snprintf(err, errlen, "--metrics-interval '%s': expected at least 0.01", a);
                rc = RO_EINVAL;
            }
            break;
        case OPT_JSON:
            c->json = true;
            break;
        case OPT_QUIET:
            c->quiet = true;
            break;
        case OPT_CHECK_FINITE:
            c->check_finite = true;
            break;
        case OPT_OVERCOMMIT:
            c->overcommit = true;
            break;
        case OPT_LEARNER:
            if (strcmp(a, "local") == 0)
                c->remote = false;
            else if (strcmp(a, "remote") == 0)
                c->remote = true;
            else {
                snprintf(err, errlen, "--learner '%s': expected local or remote", a);
                rc = RO_EINVAL;
            }
            break;
        case OPT_LISTEN:
            c->listen = a;
            break;
        case OPT_TOKEN_FILE:
            c->token_file = a;
            break;
        case OPT_MAX_FRAME:
            rc = ro__flag_u32("--max-frame-bytes", a, 1024, 1u << 30, &c->max_frame, err, errlen);
            break;
        case OPT_MAX_LEARNERS:
            rc = ro__flag_u32("--max-learners", a, 1, 4096, &c->max_learners, err, errlen);
            break;
        case OPT_LEARNER_TIMEOUT:
            rc = ro__flag_seconds("--learner-timeout", a, &c->learner_timeout, err, errlen);
            break;
        case OPT_HELLO_TIMEOUT:
            rc = ro__flag_seconds("--hello-timeout", a, &c->hello_timeout, err, errlen);
            break;
        case OPT_NUMA_NODE: {
            uint32_t v;
            rc = ro__flag_u32("--numa-node", a, 0, 63, &v, err, errlen);
            c->numa_node = rc ? -1 : (int)v;
            break;
        }
        case OPT_TOPOLOGY:
            if (*a == '\0') {
                snprintf(err, errlen, "--topology '': expected nodes like 0:0-3;1:4-7");
                rc = RO_EINVAL;
            }
            c->topology = a;
            break;
        case OPT_PRINT_TOPOLOGY:
            c->print_topology = true;
            break;
        case OPT_HELP:
            c->help = true;
            break;
        case OPT_VERSION:
            c->version = true;
            break;
        case OPT_RECORD:
            if (*a == '\0') {
                snprintf(err, errlen, "--record '': expected a file path");
                rc = RO_EINVAL;
            }
            c->record = a;
            break;
        case OPT_RECORD_MAX_BYTES:
            rc = ro__flag_u64("--record-max-bytes", a, 0, UINT64_MAX / 2, &c->record_max_bytes, err,
                              errlen);
            if (rc == 0 && c->record_max_bytes != 0 && c->record_max_bytes < 4096) {
                snprintf(err, errlen, "--record-max-bytes '%s': expected 0 or at least 4096", a);
                rc = RO_EINVAL;
            }
            break;
        case OPT_RECORD_FULL:
            if (strcmp(a, "block") == 0)
                c->record_drop = false;
            else if (strcmp(a, "drop") == 0)
                c->record_drop = true;
            else {
                snprintf(err, errlen, "--record-full '%s': expected block or drop", a);
                rc = RO_EINVAL;
            }
            break;
        case OPT_RECORD_ERROR:
            if (strcmp(a, "stop") == 0)
                c->record_keep_going = false;
            else if (strcmp(a, "continue") == 0)
                c->record_keep_going = true;
            else {
                snprintf(err, errlen, "--record-error '%s': expected stop or continue", a);
                rc = RO_EINVAL;
            }
            break;
        default: /* ':' (a missing value) or an unknown option */
            return ro__flag_getopt_error(opt, argv, err, errlen);
        }
        if (rc)
            return rc;
    }
    if (optind < argc)
        return ro__errorf(err, errlen, RO_EINVAL, "unexpected argument '%s' (see --help)",
                          argv[optind]);
    /* --steps alone means "run until the steps are done". */
    if (steps_given && !seconds_given)
        c->seconds = 0;
    return 0;
}
