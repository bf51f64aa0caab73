/*
 * A Python env worker process (pyenv_proc.h): start, commands, end.
 */

#include "envs/pyenv_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envs/pyenv_proto.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "ro_build_config.h"

extern char **environ;

/* The descriptors the worker finds its ends on (env_worker.py). */
enum { CHILD_MEM = 3, CHILD_WAKE, CHILD_DONE, CHILD_LIFE };

/* The most a wait for a STEP or RESET spins (spin_budget.h): well over
 * the round trip of 32 Pendulum envs a process, which is 300-450 us as
 * the machine's speed drifts (64 envs on 2 processes: a 400 us cap blocked
 * or missed 28 % of the waits in a slow minute, 1 ms 1 %, and 1 ms gave
 * 1-7 % more steps in 4 paired runs), less than a long one's wake is
 * worth. The spin yields between its reads, so a worker that shares our
 * CPU loses little to it. The worker stores its rows, then its ack with
 * release (python/hotpath/worker.c): an ack seen while spinning means its
 * rows are there, on any CPU. */
#define SPIN_CAP_NS 1000000u

/* The most environment variables handed on, and bytes of argv. */
#define MAX_ENV 512
#define MAX_ARGS 72

uint32_t ro__pyproc_u32(const ro_pyproc_t *p, size_t off)
{
    /* Relaxed: the other side is another process; the eventfd's syscalls
     * order the data, this only keeps the compiler from tearing the word. */
    return atomic_load_explicit((_Atomic uint32_t *)(void *)(p->mem + off), memory_order_relaxed);
}

void ro__pyproc_put_u32(ro_pyproc_t *p, size_t off, uint32_t v)
{
    /* Relaxed: as ro__pyproc_u32. */
    atomic_store_explicit((_Atomic uint32_t *)(void *)(p->mem + off), v, memory_order_relaxed);
}

/* high_fd moves fd above the worker's fixed numbers (a dup2 onto itself
 * would keep FD_CLOEXEC in some libcs), close-on-exec. */
static int high_fd(int fd)
{
    if (fd < 0)
        return fd;
    int h = fcntl(fd, F_DUPFD_CLOEXEC, 16);
    close(fd);
    return h;
}

int ro__pyproc_init(ro_pyproc_t *p, uint32_t index, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->index = index;
    p->mem_fd = p->wake_fd = p->done_fd = p->life_fd = p->cpu = -1;
    if (pthread_mutex_init(&p->lock, NULL) != 0)
        return ro__errorf(err, errlen, RO_ENOMEM, "python env worker %u: mutex", index);
    p->mem_fd = high_fd(memfd_create("rollout-pyenv", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (p->mem_fd < 0 || ftruncate(p->mem_fd, PY_DATA_OFF) != 0 ||
        fcntl(p->mem_fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
        goto fail;
    p->mem = mmap(NULL, PY_DATA_OFF, PROT_READ | PROT_WRITE, MAP_SHARED, p->mem_fd, 0);
    if (p->mem == MAP_FAILED) {
        p->mem = NULL;
        goto fail;
    }
    p->bytes = PY_DATA_OFF;
    ro__spin_budget_init(&p->spin, SPIN_CAP_NS, RO_SPIN_FIT);
    return 0;
fail:;
    int e = errno;
    ro__pyproc_free(p);
    return ro__errorf(err, errlen, -e, "python env worker %u: shared memory: %s", index,
                      strerror(e));
}

int ro__pyproc_grow(ro_pyproc_t *p, size_t bytes, char *err, size_t errlen)
{
    if (bytes <= p->bytes)
        return 0;
    void *m = MAP_FAILED;
    if (ftruncate(p->mem_fd, (off_t)bytes) != 0 ||
        fcntl(p->mem_fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        (m = mremap(p->mem, p->bytes, bytes, MREMAP_MAYMOVE)) == MAP_FAILED)
        return ro__errorf(err, errlen, -errno,
                          "python env worker %u: %zu bytes of shared memory: %s", p->index, bytes,
                          strerror(errno));
    p->mem = m;
    p->bytes = bytes;
    return 0;
}

/* child_env is environ with BLAS/OpenMP (and OpenCV's pool, which
 * Atari's resize would start) at one thread, pypath in front of
 * PYTHONPATH and ROLLOUT_BUILD_DIR this build's unless set (the worker
 * loads the package's compiled part, rollout_client/_native.py); the
 * strings of `own` are ours to free. */
static int child_env(char **envp, char **own, const char *pypath)
{
    int n = 0, k = 0;
    const char *old_path = NULL;
    bool build_dir = false;
    for (char **e = environ; *e && n < MAX_ENV - 8; e++) {
        build_dir |= !strncmp(*e, "ROLLOUT_BUILD_DIR=", 18);
        if (!strncmp(*e, "PYTHONPATH=", 11)) {
            old_path = *e + 11;
            continue;
        }
        if (!strncmp(*e, "OMP_NUM_THREADS=", 16) || !strncmp(*e, "MKL_NUM_THREADS=", 16) ||
            !strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) ||
            !strncmp(*e, "OPENCV_FOR_THREADS_NUM=", 23))
            continue;
        envp[n++] = *e;
    }
    envp[n++] = "OMP_NUM_THREADS=1";
    envp[n++] = "MKL_NUM_THREADS=1";
    envp[n++] = "OPENBLAS_NUM_THREADS=1";
    envp[n++] = "OPENCV_FOR_THREADS_NUM=1";
    if (!build_dir)
        envp[n++] = "ROLLOUT_BUILD_DIR=" RO_BUILD_ROOT;
    if (pypath || old_path) {
        size_t len = 16 + (pypath ? strlen(pypath) : 0) + (old_path ? strlen(old_path) : 0);
        char *s = malloc(len);
        if (!s)
            return RO_ENOMEM;
        snprintf(s, len, "PYTHONPATH=%s%s%s", pypath ? pypath : "", pypath && old_path ? ":" : "",
                 old_path ? old_path : "");
        own[k++] = s;
        envp[n++] = s;
    }
    envp[n] = NULL;
    return 0;
}

/* pin binds the started worker to p->cpu. Its only thread yet (exec just
 * returned): any it makes later inherits the binding. Best effort: a
 * cpuset that forbids it leaves the worker where the kernel puts it. */
static void pin(const ro_pyproc_t *p)
{
    if (p->cpu < 0 || p->cpu >= CPU_SETSIZE)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->cpu, &set);
    (void)sched_setaffinity(p->pid, sizeof set, &set);
}

int ro__pyproc_spawn(ro_pyproc_t *p, const char *python, const char *pypath,
                     const char *const *argv_tail, char *err, size_t errlen)
{
    int life[2] = {-1, -1}, rc = 0;
    char *own[1] = {NULL}, *envp[MAX_ENV], parent[24];
    const char *argv[MAX_ARGS + 6];
    posix_spawn_file_actions_t fa;
    bool fa_made = false;

    p->wake_fd = high_fd(eventfd(0, EFD_CLOEXEC));
    p->done_fd = high_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (p->wake_fd < 0 || p->done_fd < 0 || pipe2(life, O_CLOEXEC) != 0) {
        rc = ro__errorf(err, errlen, -errno, "python env worker %u: %s", p->index, strerror(errno));
        goto fail;
    }
    p->life_fd = high_fd(life[0]);
    life[0] = -1;
    life[1] = high_fd(life[1]);
    if ((rc = child_env(envp, own, pypath)) != 0)
        goto fail;
    snprintf(parent, sizeof parent, "%ld", (long)getpid());
    size_t a = 0;
    argv[a++] = python;
    argv[a++] = "-m";
    argv[a++] = "rollout_client.env_worker";
    for (size_t i = 0; argv_tail[i] && a < MAX_ARGS; i++) {
        argv[a++] = argv_tail[i];
        if (i == 0)
            argv[a++] = parent;
    }
    argv[a] = NULL;

    /* The command is waiting before the process starts: HELLO. */
    memset(p->mem, 0, PY_HEADER);
    ro__pyproc_put_u32(p, PY_H_MAGIC, PY_MAGIC);
    ro__pyproc_put_u32(p, PY_H_VERSION, PY_PROTO_VERSION);
    ro__pyproc_put_u32(p, PY_H_OP, PY_OP_HELLO);
    ro__pyproc_put_u32(p, PY_H_SEQ, ++p->seq);
    p->op = PY_OP_HELLO;
    ro__pyproc_put_u32(p, PY_H_ACK, p->seq - 1);

    if (posix_spawn_file_actions_init(&fa) != 0) {
        rc = ro__errorf(err, errlen, RO_ENOMEM, "python env worker %u: spawn actions", p->index);
        goto fail;
    }
    fa_made = true;
    if (posix_spawn_file_actions_adddup2(&fa, p->mem_fd, CHILD_MEM) ||
        posix_spawn_file_actions_adddup2(&fa, p->wake_fd, CHILD_WAKE) ||
        posix_spawn_file_actions_adddup2(&fa, p->done_fd, CHILD_DONE) ||
        posix_spawn_file_actions_adddup2(&fa, life[1], CHILD_LIFE) ||
        posix_spawn_file_actions_adddup2(&fa, 2, 1)) {
        rc = ro__errorf(err, errlen, RO_ENOMEM, "python env worker %u: spawn actions", p->index);
        goto fail;
    }
    int e = posix_spawn(&p->pid, python, &fa, NULL, (char *const *)argv, envp);
    if (e != 0) {
        p->pid = 0;
        rc = ro__errorf(err, errlen, -e, "python env worker %u: cannot start '%s': %s", p->index,
                        python, strerror(e));
        goto fail;
    }
    p->gen++;
    pin(p);
fail:
    if (fa_made)
        posix_spawn_file_actions_destroy(&fa);
    if (life[0] >= 0)
        close(life[0]);
    if (life[1] >= 0)
        close(life[1]); /* the worker's copy is the only one left */
    free(own[0]);
    if (rc)
        ro__pyproc_stop(p);
    return rc;
}

int ro__pyproc_post(ro_pyproc_t *p, uint32_t op)
{
    ro__pyproc_put_u32(p, PY_H_OP, op);
    ro__pyproc_put_u32(p, PY_H_ERR_LEN, 0);
    p->op = op;
    p->posted_ns = ro__now_ns();
    /* Seq_cst, as the worker's store of its sleeping word and load of
     * this one (python/hotpath/worker.c): of the two loads, one sees the
     * other side's store, so either the worker finds this command without
     * sleeping or we find it asleep and wake it. A spinning worker costs
     * no syscall. The store also releases the rows and header written
     * before it. */
    atomic_store_explicit((_Atomic uint32_t *)(void *)(p->mem + PY_H_SEQ), ++p->seq,
                          memory_order_seq_cst);
    if (!atomic_load_explicit((_Atomic uint32_t *)(void *)(p->mem + PY_H_WORKER_SLEEPS),
                              memory_order_seq_cst))
        return 0;
    uint64_t one = 1;
    return write(p->wake_fd, &one, sizeof one) == sizeof one ? 0 : RO_EIO;
}

/* died says how the worker ended (reaping it). */
static void died(ro_pyproc_t *p, char *what, size_t len)
{
    int st = 0;
    pid_t r = waitpid(p->pid, &st, 0);
    p->pid = 0;
    if (r < 0)
        snprintf(what, len, "ended");
    else if (WIFSIGNALED(st))
        snprintf(what, len, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(what, len, "exited with status %d", WEXITSTATUS(st));
}

/* answered says whether the worker's ack word has moved past the command
 * before the posted one (a worker may write anything there: the wait's
 * caller checks it is the posted one). */
static bool answered(const ro_pyproc_t *p, memory_order order)
{
    return atomic_load_explicit((const _Atomic uint32_t *)(const void *)(p->mem + PY_H_ACK),
                                order) != p->seq - 1;
}

/* sleep_for_ack sleeps until the worker answers the posted command (0),
 * dies (RO_EIO) or timeout_ms pass (RO_ETIMEDOUT). The node's sleeping
 * word tells the worker to write its eventfd (seq_cst, as its ack store
 * and load of this word: one of us sees the other's store); a count left
 * by an earlier command's wake is passed over. */
static int sleep_for_ack(ro_pyproc_t *p, int timeout_ms)
{
    _Atomic uint32_t *sleeps = (_Atomic uint32_t *)(void *)(p->mem + PY_H_NODE_SLEEPS);
    const uint64_t deadline = ro__now_ns() + (uint64_t)timeout_ms * 1000000u;
    atomic_store_explicit(sleeps, 1, memory_order_seq_cst);
    int rc = 0;
    while (!answered(p, memory_order_seq_cst)) {
        const uint64_t now = ro__now_ns();
        const int left = now >= deadline ? 0 : (int)((deadline - now + 999999u) / 1000000u);
        struct pollfd fds[2] = {{.fd = p->done_fd, .events = POLLIN},
                                {.fd = p->life_fd, .events = POLLIN}};
        int n = poll(fds, 2, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {
            rc = RO_ETIMEDOUT;
            break;
        }
        if (fds[0].revents & POLLIN) {
            uint64_t v;
            (void)!read(p->done_fd, &v, sizeof v);
            continue;
        }
        if (!answered(p, memory_order_acquire))
            rc = RO_EIO; /* the pipe closed: the worker is gone */
        break;
    }
    /* Relaxed: the next command's seq store orders it before the worker
     * can answer again. */
    atomic_store_explicit(sleeps, 0, memory_order_relaxed);
    return rc;
}

int ro__pyproc_wait(ro_pyproc_t *p, int timeout_ms, char *err, size_t errlen)
{
    char what[128], text[PY_ERR_MAX];
    int rc;
    if (p->pid == 0)
        return ro__errorf(err, errlen, RO_EIO, "python env worker %u is not running", p->index);
    const bool timed = p->op == PY_OP_STEP || p->op == PY_OP_RESET;
    const uint64_t budget = timed ? ro__spin_budget_next(&p->spin) : 0;
    const bool hit =
        budget && ro__spin_while_u32((const _Atomic uint32_t *)(void *)(p->mem + PY_H_ACK),
                                     p->seq - 1, p->posted_ns + budget);
    rc = hit ? 0 : sleep_for_ack(p, timeout_ms);
    if (timed && rc == 0)
        ro__spin_budget_record(&p->spin, budget, ro__now_ns() - p->posted_ns, hit);
    if (rc == RO_ETIMEDOUT) {
        ro__pyproc_stop(p);
        snprintf(what, sizeof what, "did not answer within %d ms (killed)", timeout_ms);
    } else if (rc == RO_EIO) {
        died(p, what, sizeof what);
        ro__pyproc_stop(p);
    } else {
        uint32_t ack = ro__pyproc_u32(p, PY_H_ACK), st = ro__pyproc_u32(p, PY_H_STATUS);
        if (ack == p->seq && st == PY_STATUS_OK)
            return 0;
        ro__pyproc_stop(p);
        if (ack == p->seq && st == PY_STATUS_FATAL) {
            snprintf(what, sizeof what, "gave up");
            rc = RO_EINVAL;
        } else {
            snprintf(what, sizeof what, "answered command %u with ack %u status %u (killed)",
                     p->seq, ack, st);
            rc = RO_EPROTO;
        }
    }
    ro__pyproc_text(p, text, sizeof text);
    /* The message is one line: the traceback's last (the exception); the
     * whole text stays in the memory for the caller's log. */
    char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == ' '))
        *--end = '\0';
    char *last = strrchr(text, '\n');
    last = last ? last + 1 : text;
    return ro__errorf(err, errlen, rc, "python env worker %u %s%s%s", p->index, what,
                      last[0] ? ": " : "", last);
}

void ro__pyproc_text(const ro_pyproc_t *p, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!p->mem || len == 0)
        return;
    uint32_t n = ro__pyproc_u32(p, PY_H_ERR_LEN);
    n = n > PY_ERR_MAX ? PY_ERR_MAX : n;
    n = n >= len ? (uint32_t)len - 1 : n;
    memcpy(buf, p->mem + PY_ERR_OFF, n);
    buf[n] = '\0';
}

void ro__pyproc_stop(ro_pyproc_t *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        p->pid = 0;
    }
    int *fds[] = {&p->wake_fd, &p->done_fd, &p->life_fd};
    for (size_t i = 0; i < 3; i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

void ro__pyproc_free(ro_pyproc_t *p)
{
    ro__pyproc_stop(p);
    if (p->mem)
        munmap(p->mem, p->bytes);
    if (p->mem_fd >= 0)
        close(p->mem_fd);
    pthread_mutex_destroy(&p->lock);
    p->mem = NULL;
    p->mem_fd = -1;
}
