#include "learner/cli.h"

#include <getopt.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/flags.h"
#include "wire/frame.h"

void ro__learner_usage(FILE *f)
{
    fputs("usage: rollout-learner --connect HOST:PORT [--connect HOST:PORT ...] [options]\n"
          "\n"
          "Attaches to rollout-nodes started with --learner remote, batches the\n"
          "observations of all of them into forward passes, and sends the actions back.\n"
          "\n"
          "  --connect HOST:PORT     a node to serve (repeatable, up to 64)\n"
          "  --token-file FILE       the nodes' shared secret\n"
          "  --policy random|mlp|FILE  random actions, a seeded MLP (default), or a\n"
          "                          PolicyParams file\n"
          "  --hidden H1,H2,...      MLP hidden widths (default 64,64)\n"
          "  --activation tanh|relu  MLP activation (default tanh)\n"
          "  --gemm exact|openblas   dense-layer kernel (default exact)\n"
          "  --workers W             forward-pass threads, pinned (default 1); the learner\n"
          "                          runs 1 loop thread + W\n"
          "  --overcommit            allow more workers than allowed CPUs\n"
          "  --batch B               most envs per forward pass (default 1024)\n"
          "  --max-wait-us US        wait up to this long for a fuller batch (default 0:\n"
          "                          batch what one turn of the event loop brought)\n"
          "  --seed S                policy init and action sampling seed (default 1)\n"
          "  --steps N               stop after answering N env steps\n"
          "  --seconds S             stop after S seconds (default: run until the nodes stop)\n"
          "  --max-frame-bytes N     largest frame accepted from a node (default 16 MiB)\n"
          "  --reconnect-s S         a node whose connection is lost (no goodbye) is\n"
          "                          reconnected to, with backoff, for up to S seconds\n"
          "                          without a connection, then given up (default 60;\n"
          "                          0: never reconnect)\n"
          "  --name NAME             shown in the nodes' logs\n"
          "  --push-policy FILE      instead of serving envs, push these weights (a\n"
          "                          PolicyParams file) to nodes running their own learner\n"
          "                          lanes with --listen, and exit when all accepted them\n"
          "  --json                  one-line JSON summary on stdout\n"
          "  --quiet                 no progress lines\n"
          "  --help, --version\n",
          f);
}

enum {
    OPT_CONNECT = 256,
    OPT_TOKEN_FILE,
    OPT_POLICY,
    OPT_HIDDEN,
    OPT_ACTIVATION,
    OPT_GEMM,
    OPT_BATCH,
    OPT_WORKERS,
    OPT_OVERCOMMIT,
    OPT_MAX_WAIT,
    OPT_SEED,
    OPT_STEPS,
    OPT_SECONDS,
    OPT_MAX_FRAME,
    OPT_RECONNECT,
    OPT_NAME,
    OPT_PUSH_POLICY,
    OPT_JSON,
    OPT_QUIET,
    OPT_HELP,
    OPT_VERSION,
};

static const struct option long_opts[] = {
    {"connect", required_argument, NULL, OPT_CONNECT},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"activation", required_argument, NULL, OPT_ACTIVATION},
    {"gemm", required_argument, NULL, OPT_GEMM},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"overcommit", no_argument, NULL, OPT_OVERCOMMIT},
    {"max-wait-us", required_argument, NULL, OPT_MAX_WAIT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"max-frame-bytes", required_argument, NULL, OPT_MAX_FRAME},
    {"reconnect-s", required_argument, NULL, OPT_RECONNECT},
    {"name", required_argument, NULL, OPT_NAME},
    {"push-policy", required_argument, NULL, OPT_PUSH_POLICY},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

int ro__learner_cfg_parse(ro_learner_cfg_t *c, int argc, char **argv, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->policy.kind = RO_POLICY_MLP;
    c->policy.hidden[0] = c->policy.hidden[1] = 64;
    c->policy.nhidden = 2;
    c->policy.activation = RO_ACT_TANH;
    c->policy.seed = 1;
    c->batch = 1024;
    c->workers = 1;
    c->max_frame = RO_WIRE_DEFAULT_MAX_FRAME;
    c->reconnect_s = 60.0;
    c->name = "rollout-learner";
    optind = 1;
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
        int rc = 0;
        const char *a = optarg;
        switch (opt) {
        case OPT_CONNECT:
            if (c->nconnect == RO_LEARNER_MAX_NODES) {
                snprintf(err, errlen, "--connect: at most %d nodes", RO_LEARNER_MAX_NODES);
                return RO_EINVAL;
            }
            c->connect[c->nconnect++] = a;
            break;
        case OPT_TOKEN_FILE:
            c->token_file = a;
            break;
        case OPT_POLICY:
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
        case OPT_BATCH:
            rc = ro__flag_u32("--batch", a, 1, 1u << 20, &c->batch, err, errlen);
            break;
        case OPT_WORKERS:
            rc = ro__flag_u32("--workers", a, 1, 1024, &c->workers, err, errlen);
            break;
        case OPT_OVERCOMMIT:
            c->overcommit = true;
            break;
        case OPT_MAX_WAIT:
            rc = ro__flag_u64("--max-wait-us", a, 0, 60000000, &c->max_wait_us, err, errlen);
            break;
        case OPT_SEED:
            rc = ro__flag_u64("--seed", a, 0, UINT64_MAX, &c->policy.seed, err, errlen);
            break;
        case OPT_STEPS:
            rc = ro__flag_u64("--steps", a, 1, UINT64_MAX / 2, &c->steps, err, errlen);
            break;
        case OPT_SECONDS:
            rc = ro__flag_seconds("--seconds", a, &c->seconds, err, errlen);
            break;
        case OPT_MAX_FRAME:
            rc = ro__flag_u32("--max-frame-bytes", a, 1024, 1u << 30, &c->max_frame, err, errlen);
            break;
        case OPT_RECONNECT:
            rc = ro__flag_seconds("--reconnect-s", a, &c->reconnect_s, err, errlen);
            break;
        case OPT_NAME:
            c->name = a;
            break;
        case OPT_PUSH_POLICY:
            c->push_policy = a;
            break;
        case OPT_JSON:
            c->json = true;
            break;
        case OPT_QUIET:
            c->quiet = true;
            break;
        case OPT_HELP:
            c->help = true;
            break;
        case OPT_VERSION:
            c->version = true;
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
    if (c->nconnect == 0 && !c->help && !c->version) {
        snprintf(err, errlen, "no node to serve: give --connect HOST:PORT (see --help)");
        return RO_EINVAL;
    }
    return 0;
}
