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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay/cli.h"
#include "replay/replay.h"
#include "replay/serve.h"
#include "ro_build_config.h"
#include "runtime/thread_guard.h"

/* Maps a whole file read-only. Returns 0, or -1 with a message printed. */
static int map_file(const char *path, const uint8_t **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "rollout-replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "rollout-replay: %s: not a regular file\n", path);
        close(fd);
        return -1;
    }
    *len = (size_t)st.st_size;
    *data = NULL;
    if (*len > 0) {
        void *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "rollout-replay: cannot map %s: %s\n", path, strerror(errno));
            close(fd);
            return -1;
        }
        *data = p;
    }
    close(fd);
    return 0;
}

/* --serve: map every part, then stream them to one learner. */
static int serve_files(const char *addr, char **paths, size_t n, const char *plugin)
{
    ro_serve_file_t *files = calloc(n, sizeof *files);
    if (!files)
        return 2;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        files[i].name = paths[i];
        if (map_file(paths[i], &files[i].data, &files[i].len) != 0 || !files[i].data)
            rc = 2;
    }
    if (rc == 0)
        rc = ro__replay_serve(addr, files, n, plugin, stderr);
    for (size_t i = 0; i < n; i++)
        if (files[i].data)
            munmap((void *)files[i].data, files[i].len);
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
    if (cfg.help) {
        ro__replay_usage(stdout);
        return 0;
    }
    if (cfg.version) {
        printf("rollout-replay %s\n", RO_VERSION);
        return 0;
    }
    ro_replay_opts_t o = cfg.o;
    o.out = stdout;
    o.log = stderr;
    if (cfg.serve)
        return serve_files(cfg.serve, argv + cfg.files, (size_t)(argc - cfg.files), o.plugin);
    ro_replay_t *r;
    if (ro__replay_new(&r, &o) != 0) {
        fprintf(stderr, "rollout-replay: out of memory\n");
        return 2;
    }
    int rc = RO_REPLAY_OK;
    for (int i = cfg.files; i < argc && rc == RO_REPLAY_OK; i++) {
        const uint8_t *data;
        size_t len;
        if (map_file(argv[i], &data, &len) != 0) {
            rc = RO_REPLAY_UNUSABLE;
            break;
        }
        rc = ro__replay_feed(r, argv[i], data, len);
        if (data)
            munmap((void *)data, len);
    }
    int fin = ro__replay_finish(r);
    ro__replay_free(r);
    return rc != RO_REPLAY_OK ? rc : fin;
}
