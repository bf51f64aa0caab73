/*
 * rollout-replay: check, print and summarise trajectory files written by
 * rollout-node --record. See docs/replay.md.
 *
 * Exit status: 0 when every file was read (a file cut short at its end is a
 * warning) and, with --verify, every replayed step matched bit for bit; 1
 * on a divergence or a damaged record; 2 for a bad flag, a file that cannot
 * be read or is not a trajectory file, or an env that cannot be loaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay/bisect.h"
#include "replay/cli.h"
#include "replay/fork.h"
#include "replay/replay.h"
#include "replay/serve.h"
#include "ro_build_config.h"
#include "runtime/flags.h"
#include "runtime/thread_guard.h"
#include "wire/token.h"

/* --serve: open every part (read with pread, never mapped: a file cut
 * meanwhile is an error, not a SIGBUS), then stream them to one learner. */
static int serve_files(const ro_replay_cfg_t *cfg, char **paths, size_t n)
{
    char token[RO_TOKEN_MAX + 2], err[512];
    ro_serve_opts_t o = {
        .addr = cfg->serve,
        .plugin = cfg->o.plugin,
        .hello_timeout_s = cfg->hello_timeout,
    };
    if (cfg->token_file) {
        if (ro__token_read(cfg->token_file, token, sizeof token, err, sizeof err) != 0) {
            fprintf(stderr, "rollout-replay: %s\n", err);
            return 2;
        }
        if (ro__token_exposed(cfg->token_file, err, sizeof err))
            fprintf(stderr, "rollout-replay: warning: %s\n", err);
        o.token = token;
    }
    ro_serve_file_t *files = calloc(n, sizeof *files);
    if (!files)
        return 2;
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        files[i].fd = -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        files[i].name = paths[i];
        files[i].fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (files[i].fd < 0) {
            fprintf(stderr, "rollout-replay: cannot open %s: %s\n", paths[i], strerror(errno));
            rc = 2;
        }
    }
    if (rc == 0)
        rc = ro__replay_serve(&o, files, n, stderr);
    for (size_t i = 0; i < n; i++)
        if (files[i].fd >= 0)
            close(files[i].fd);
    free(files);
    return rc;
}

int main(int argc, char **argv)
{
    /* Plugins may link OpenBLAS: keep it single-threaded, like the node. */
    ro__threads_single_blas(argv);
    ro_replay_cfg_t cfg;
    char err[512];
    if (ro__replay_cfg_parse(&cfg, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-replay: %s\n", err);
        return 2;
    }
    if (ro__flags_answer(cfg.help, cfg.version, ro__replay_usage, "rollout-replay", RO_VERSION))
        return 0;
    ro_replay_opts_t o = cfg.o;
    o.out = stdout;
    o.log = stderr;
    if (cfg.serve)
        return serve_files(&cfg, argv + cfg.files, (size_t)(argc - cfg.files));
    if (cfg.bisect)
        return ro__replay_bisect(argv + cfg.files, (size_t)(argc - cfg.files), stdout, stderr);
    ro_replay_t *r;
    if (ro__replay_new(&r, &o) != 0) {
        fprintf(stderr, "rollout-replay: out of memory\n");
        return 2;
    }
    int rc = RO_REPLAY_OK;
    for (int i = cfg.files; i < argc && rc == RO_REPLAY_OK && !ro__replay_stopped(r); i++)
        rc = ro__replay_feed_path(r, argv[i]);
    int fin = ro__replay_finish(r);
    if (cfg.fork_set && rc == RO_REPLAY_OK && fin == RO_REPLAY_OK) {
        ro_fork_opts_t fo = {.step = cfg.fork_step,
                             .policy = cfg.policy,
                             .steps = cfg.steps,
                             .out = cfg.record,
                             .parent = argv[cfg.files],
                             .seed_set = cfg.seed_set,
                             .seed = cfg.seed};
        fin = ro__replay_fork(r, &fo);
    }
    ro__replay_free(r);
    return rc != RO_REPLAY_OK ? rc : fin;
}
