/*
 * The machine's limit for a SEED round trip: two processes exchanging
 * frames the size of rollout's (an Observations frame out, an Actions frame
 * back) over loopback TCP and over a Unix-domain socket, K frames in
 * flight, nothing else done. A SEED node serving E envs in frames of B
 * cannot step faster than (round trips per second) x B, whatever its code:
 * bench_learners.py sets its SEED figures beside this bound.
 *
 * usage: bench_roundtrip [--envs E] [--batch B] [--inflight K] [--seconds S]
 * Prints one JSON line per transport: round trips/s, microseconds each, and
 * the bound in env steps/s.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int full_read(int fd, char *b, size_t n)
{
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static int full_write(int fd, const char *b, size_t n)
{
    while (n) {
        ssize_t r = write(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* A connected pair: a socketpair, or a loopback TCP connection. */
static int pair(int tcp, int fds[2])
{
    if (!tcp)
        return socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) != 0 || listen(l, 1) != 0)
        return -1;
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof a) != 0)
        return -1;
    fds[1] = accept(l, NULL, NULL);
    close(l);
    if (fds[1] < 0)
        return -1;
    setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

/* The learner's side: answer every frame until the node hangs up. */
static void echo(int fd, size_t obs_bytes, size_t act_bytes)
{
    char *b = malloc(obs_bytes > act_bytes ? obs_bytes : act_bytes);
    while (b && full_read(fd, b, obs_bytes) == 0 && full_write(fd, b, act_bytes) == 0) {
    }
    _exit(0);
}

static int run(int tcp, int envs, int batch, int inflight, double seconds)
{
    /* CartPole: 4 float observations, a reward and flags per env; one int
     * action per env back; and a few bytes of framing either way. */
    size_t obs_bytes = (size_t)batch * (4 * 4 + 4 + 2) + 32, act_bytes = (size_t)batch * 4 + 16;
    int fds[2];
    if (pair(tcp, fds) != 0) {
        perror("bench_roundtrip: socket pair");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(fds[0]);
        echo(fds[1], obs_bytes, act_bytes);
    }
    close(fds[1]);
    char *b = calloc(1, obs_bytes);
    if (!b)
        return 1;
    for (int k = 0; k < inflight; k++)
        if (full_write(fds[0], b, obs_bytes) != 0)
            return 1;
    unsigned long trips = 0;
    double t0 = now_s(), t = t0;
    while (t - t0 < seconds) {
        if (full_read(fds[0], b, act_bytes) != 0 || full_write(fds[0], b, obs_bytes) != 0)
            return 1;
        if (++trips % 256 == 0)
            t = now_s();
    }
    t = now_s() - t0;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    free(b);
    double rate = (double)trips / t;
    printf("{\"transport\":\"%s\",\"envs\":%d,\"batch\":%d,\"inflight\":%d,\"round_trips_per_s\":"
           "%.0f,\"us_per_round_trip\":%.2f,\"bound_sps\":%.0f}\n",
           tcp ? "tcp" : "unix", envs, batch, inflight, rate, 1e6 * (double)inflight / rate,
           rate * batch);
    return 0;
}

int main(int argc, char **argv)
{
    int envs = 256, batch = 128, inflight = 0;
    double seconds = 1.0;
    int i = 1;
    for (; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--envs"))
            envs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--inflight"))
            inflight = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else
            break;
    }
    if (i != argc || envs < 1 || batch < 1 || batch > envs || inflight < 0 || !(seconds > 0)) {
        fprintf(stderr, "usage: bench_roundtrip [--envs E] [--batch B<=E] [--inflight K] "
                        "[--seconds S]\n");
        return 2;
    }
    if (inflight == 0)
        inflight = envs / batch; /* as the node: every env's batch in flight */
    signal(SIGPIPE, SIG_IGN);
    return run(1, envs, batch, inflight, seconds) || run(0, envs, batch, inflight, seconds);
}
