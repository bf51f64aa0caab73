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
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay/replay.h"
#include "replay/serve.h"
#include "ro_build_config.h"
#include "runtime/thread_guard.h"

static void usage(FILE *f)
{
    fputs("usage: rollout-replay MODE... [options] FILE...\n"
          "\n"
          "Reads trajectory files written by rollout-node --record. Give the parts of a\n"
          "rotated recording in order: PATH PATH.1 PATH.2 ...\n"
          "\n"
          "modes (one or more):\n"
          "  --verify            re-create every env from the header, re-step it with the\n"
          "                      recorded actions and compare every observation, reward\n"
          "                      and flag bit for bit; report the first divergence\n"
          "  --dump              one JSON object per entry on stdout\n"
          "  --stats             episodes, return and length per env and overall (JSON)\n"
          "  --serve HOST:PORT   act as a node for one learner (docs/protocol.md): stream\n"
          "                      the recorded observations in order and count the\n"
          "                      learner's actions that differ from the recorded ones\n"
          "options:\n"
          "  --env LIST          only these env indices (comma-separated, repeatable)\n"
          "  --episode LIST      --dump/--stats: only these episodes\n"
          "  --plugin PATH       load the env from PATH instead of the header's --env\n"
          "  --no-resync         stop at the first damaged record instead of skipping it\n"
          "  --help, --version\n"
          "\n"
          "exit status: 0 ok, 1 divergence or damaged record, 2 usage or unusable file\n",
          f);
}

static int parse_list(const char *flag, const char *s, uint64_t max, uint64_t *out, size_t *n,
                      size_t cap)
{
    char buf[1024];
    if (strlen(s) >= sizeof buf || *s == '\0' || s[strlen(s) - 1] == ',')
        goto bad;
    strcpy(buf, s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        if (*t == '-' || *t == '+')
            goto bad;
        unsigned long long v = strtoull(t, &end, 10);
        if (errno || *end || end == t || v > max || *n == cap)
            goto bad;
        out[(*n)++] = v;
    }
    return 0;
bad:
    fprintf(stderr, "rollout-replay: %s '%s': expected up to %zu comma-separated integers\n", flag,
            s, cap);
    return -1;
}

enum {
    O_VERIFY = 256,
    O_DUMP,
    O_STATS,
    O_ENV,
    O_EPISODE,
    O_PLUGIN,
    O_NO_RESYNC,
    O_SERVE,
    O_HELP,
    O_VERSION
};

static const struct option opts[] = {
    {"verify", no_argument, NULL, O_VERIFY},
    {"dump", no_argument, NULL, O_DUMP},
    {"stats", no_argument, NULL, O_STATS},
    {"env", required_argument, NULL, O_ENV},
    {"episode", required_argument, NULL, O_EPISODE},
    {"plugin", required_argument, NULL, O_PLUGIN},
    {"no-resync", no_argument, NULL, O_NO_RESYNC},
    {"serve", required_argument, NULL, O_SERVE},
    {"help", no_argument, NULL, O_HELP},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

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
    ro_replay_opts_t o = {.resync = true, .out = stdout, .log = stderr};
    const char *serve = NULL;
    uint64_t tmp[RO_REPLAY_MAX_FILTER];
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case O_VERIFY:
            o.verify = true;
            break;
        case O_DUMP:
            o.dump = true;
            break;
        case O_STATS:
            o.stats = true;
            break;
        case O_ENV: {
            size_t n = o.nenvs;
            for (size_t i = 0; i < n; i++)
                tmp[i] = o.envs[i];
            if (parse_list("--env", optarg, UINT32_MAX, tmp, &n, RO_REPLAY_MAX_FILTER))
                return 2;
            for (size_t i = 0; i < n; i++)
                o.envs[i] = (uint32_t)tmp[i];
            o.nenvs = n;
            break;
        }
        case O_EPISODE:
            if (parse_list("--episode", optarg, UINT64_MAX, o.episodes, &o.nepisodes,
                           RO_REPLAY_MAX_FILTER))
                return 2;
            break;
        case O_PLUGIN:
            o.plugin = optarg;
            break;
        case O_NO_RESYNC:
            o.resync = false;
            break;
        case O_SERVE:
            serve = optarg;
            break;
        case O_HELP:
            usage(stdout);
            return 0;
        case O_VERSION:
            printf("rollout-replay %s\n", RO_VERSION);
            return 0;
        case ':':
            fprintf(stderr, "rollout-replay: %s: missing value (see --help)\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "rollout-replay: unknown option '%s' (see --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (serve) {
        if (o.verify || o.dump || o.stats || optind >= argc) {
            fprintf(stderr, "rollout-replay: --serve takes the trajectory files and no other "
                            "mode (see --help)\n");
            return 2;
        }
        return serve_files(serve, argv + optind, (size_t)(argc - optind), o.plugin);
    }
    if (!o.verify && !o.dump && !o.stats) {
        fprintf(stderr, "rollout-replay: nothing to do: give --verify, --dump or --stats (see "
                        "--help)\n");
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "rollout-replay: no trajectory file given (see --help)\n");
        return 2;
    }
    ro_replay_t *r;
    if (ro__replay_new(&r, &o) != 0) {
        fprintf(stderr, "rollout-replay: out of memory\n");
        return 2;
    }
    int rc = RO_REPLAY_OK;
    for (int i = optind; i < argc && rc == RO_REPLAY_OK; i++) {
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
