/*
 * Resident memory over a long run: starts rollout-node as a child, samples
 * its resident set (/proc/PID/statm) and thread count (/proc/PID/status)
 * every interval, and reports the growth after warm-up: the largest
 * resident size seen after `warmup` seconds minus the size at warm-up.
 *
 * usage: bench_rss --node PATH [--interval S] [--warmup S] [--csv FILE]
 *                  [--summary FILE] [--help] [-- NODE ARGS...]
 * The node runs with --json --quiet plus NODE ARGS (default: cartpole +
 * MLP(64,64), --steps 100000000).
 */
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/flags.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Resident KiB and threads of pid; false once it is gone. */
static int sample(pid_t pid, long *rss_kib, int *threads)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long size, resident;
    int ok = fscanf(f, "%ld %ld", &size, &resident) == 2;
    fclose(f);
    if (!ok)
        return 0;
    *rss_kib = resident * (sysconf(_SC_PAGESIZE) / 1024);
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    *threads = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Threads: %d", threads) == 1)
                break;
        fclose(f);
    }
    return 1;
}

/* The value of "key": in a one-line JSON summary, or -1. */
static double json_num(const char *js, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(js, pat);
    return p ? atof(p + strlen(pat)) : -1;
}

typedef struct rss_opts {
    const char *node, *csv, *summary;
    double interval, warmup;
    bool help;
} rss_opts_t;

#define AT(field) offsetof(rss_opts_t, field)
static const ro_flag_t rss_flags[] = {
    {RO_FLAG_STRING, "node", "PATH", AT(node), .help = "the rollout-node to run (required)"},
    {RO_FLAG_SECONDS, "interval", "S", AT(interval), 10, .help = "between samples (default 1)"},
    {RO_FLAG_SECONDS, "warmup", "S", AT(warmup), 0,
     .help = "growth is measured after this (default 3)"},
    {RO_FLAG_STRING, "csv", "FILE", AT(csv), .help = "every sample as CSV"},
    {RO_FLAG_STRING, "summary", "FILE", AT(summary), .help = "the summary row as CSV"},
    {RO_FLAG_BOOL, "help", NULL, AT(help), .help = "this text"},
};

int main(int argc, char **argv)
{
    rss_opts_t o = {.interval = 1.0, .warmup = 3.0};
    const size_t nflags = sizeof rss_flags / sizeof rss_flags[0];
    const char *usage = "usage: bench_rss --node PATH [options] [-- NODE ARGS...]\n\nResident "
                        "memory of a rollout-node over a long run, sampled from\n/proc; the node "
                        "runs with --json --quiet and NODE ARGS (default:\n--steps "
                        "100000000).\n\n";
    char err[256];
    int i;
    if (ro__flags_parse(rss_flags, nflags, &o, NULL, argc, argv, &i, err, sizeof err) != 0) {
        fprintf(stderr, "bench_rss: %s\n", err);
        return 2;
    }
    if (o.help) {
        ro__flags_usage(stdout, usage, rss_flags, nflags);
        return 0;
    }
    if (!o.node) {
        fprintf(stderr, "bench_rss: --node PATH is required (see --help)\n");
        return 2;
    }
    const char *node = o.node, *csv = o.csv, *summary = o.summary;
    double interval = o.interval, warmup = o.warmup;
    char *defaults[] = {"--steps", "100000000"};
    char **extra = i < argc ? argv + i : defaults;
    int nextra = i < argc ? argc - i : 2;
    char **cargv = calloc((size_t)nextra + 4, sizeof *cargv);
    cargv[0] = (char *)node;
    cargv[1] = "--json";
    cargv[2] = "--quiet";
    for (int k = 0; k < nextra; k++)
        cargv[3 + k] = extra[k];

    int fd[2];
    if (pipe(fd) != 0)
        return 1;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execv(node, cargv);
        _exit(127);
    }
    close(fd[1]);
    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (out)
        fprintf(out, "t_s,rss_kib,threads\n");
    double t0 = now_s();
    long rss_warm = -1, rss_max_after = 0, rss_last = 0;
    int threads_max = 0;
    for (;;) {
        long rss;
        int th;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            pid = -1;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "bench_rss: the node failed\n");
                return 1;
            }
            break;
        }
        double t = now_s() - t0;
        if (sample(pid, &rss, &th)) {
            if (out)
                fprintf(out, "%.2f,%ld,%d\n", t, rss, th);
            rss_last = rss;
            if (th > threads_max)
                threads_max = th;
            if (t >= warmup) {
                if (rss_warm < 0)
                    rss_warm = rss;
                if (rss > rss_max_after)
                    rss_max_after = rss;
            }
        }
        /* Sleep in short slices so a finished child is seen promptly
         * (WNOWAIT: it is reaped, with its status, at the top). */
        double until = now_s() + interval;
        for (;;) {
            siginfo_t info;
            memset(&info, 0, sizeof info);
            if (now_s() >= until ||
                waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
                info.si_pid != 0)
                break;
            struct timespec slice = {0, 20000000};
            nanosleep(&slice, NULL);
        }
    }
    if (out)
        fclose(out);
    char js[8192] = "";
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof js && (r = read(fd[0], js + len, sizeof js - 1 - len)) > 0)
        len += (size_t)r;
    js[len] = '\0';
    close(fd[0]);
    double steps = json_num(js, "steps"), secs = json_num(js, "seconds");
    double growth = rss_warm >= 0 ? (double)(rss_max_after - rss_warm) : -1;
    printf("steps %.0f in %.1f s | RSS at warm-up (%.0f s) %ld KiB, max after %ld KiB, final %ld "
           "KiB | growth %.0f KiB | threads max %d (expected %.0f)\n",
           steps, secs, warmup, rss_warm, rss_max_after, rss_last, growth, threads_max,
           json_num(js, "threads_expected"));
    if (summary) {
        FILE *f = fopen(summary, "w");
        if (f) {
            fprintf(f, "steps,seconds,sps,warmup_s,rss_warmup_kib,rss_max_after_kib,"
                       "rss_final_kib,growth_kib,threads_max,threads_expected\n");
            fprintf(f, "%.0f,%.2f,%.0f,%.1f,%ld,%ld,%ld,%.0f,%d,%.0f\n", steps, secs,
                    json_num(js, "sps"), warmup, rss_warm, rss_max_after, rss_last, growth,
                    threads_max, json_num(js, "threads_expected"));
            fclose(f);
        }
    }
    free(cargv);
    return 0;
}
