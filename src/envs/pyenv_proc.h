/*
 * One Python env worker process (python -m rollout_client.env_worker): its
 * start, its shared memory, one command at a time, and its end. The host
 * (pyenv_host.h) decides what the commands are; this file only knows how to
 * hand one over and wait for it without trusting the process: a wait ends
 * when the process answers, dies, or overruns its time.
 *
 * Threads: the caller holds `lock` around everything but init and free
 * (shards on two workers may share a process).
 */
#ifndef RO_ENVS_PYENV_PROC_H
#define RO_ENVS_PYENV_PROC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "runtime/spin_budget.h"

typedef struct ro_pyproc {
    pthread_mutex_t lock;
    uint32_t index; /* in its host, for messages */
    pid_t pid;      /* 0: not running */
    int mem_fd;     /* the memfd, kept across restarts */
    int wake_fd;    /* eventfd: the node wakes the worker */
    int done_fd;    /* eventfd: the worker says a command is done */
    int life_fd;    /* read end of a pipe only the worker holds open */
    uint8_t *mem;   /* the mapping, never moved once grown */
    size_t bytes;
    uint32_t seq;       /* the last command's */
    uint32_t op;        /* the last command */
    uint32_t gen;       /* starts: 1 after the first, +1 per restart */
    uint64_t posted_ns; /* when the last command was posted */
    int cpu;            /* the CPU each start is pinned to (its host sets it); -1: none */
    /* Whether a wait spins before it sleeps (ro__pyproc_wait): the round
     * trips of STEP and RESET, kept across restarts. */
    ro_spin_budget_t spin;
} ro_pyproc_t;

/* ro__pyproc_init makes p's memory (the header and spec area, sealed
 * against shrinking) and no process. 0, or a negative code with err. */
int ro__pyproc_init(ro_pyproc_t *p, uint32_t index, char *err, size_t errlen);

/* ro__pyproc_grow makes the memory `bytes` long (the rows after the spec
 * is known) and seals its size. Before the first ATTACH only. */
int ro__pyproc_grow(ro_pyproc_t *p, size_t bytes, char *err, size_t errlen);

/* ro__pyproc_spawn starts the worker: python (an interpreter path) -m
 * rollout_client.env_worker with argv_tail (NULL-terminated), BLAS and
 * OpenMP at one thread, pypath in front of PYTHONPATH (NULL: none), its
 * stdout to our stderr, pinned to p->cpu (if not -1). The first command
 * (PY_OP_HELLO) is posted: wait for it with ro__pyproc_wait. 0, or a
 * negative code with err. */
int ro__pyproc_spawn(ro_pyproc_t *p, const char *python, const char *pypath,
                     const char *const *argv_tail, char *err, size_t errlen);

/* ro__pyproc_post hands the worker command op (the rows already written):
 * a store of the sequence word, and an eventfd write only when the worker
 * sleeps (PY_H_WORKER_SLEEPS). */
int ro__pyproc_post(ro_pyproc_t *p, uint32_t op);

/*
 * ro__pyproc_wait waits for the posted command: a STEP or RESET first spins
 * on the answer word as long as p->spin allows (runtime/spin_budget.h),
 * then sleeps on the worker's eventfd (which the worker writes only when
 * PY_H_NODE_SLEEPS says we sleep). 0 when done; RO_EINVAL when
 * the worker reported a fatal error; RO_EIO when it died (err says how);
 * RO_ETIMEDOUT past timeout_ms; RO_EPROTO when it answered out of turn.
 * On any failure the worker is gone (killed and reaped). err gets what
 * happened and the last line of the worker's error text, if it wrote one
 * (ro__pyproc_text has all of it: a Python traceback).
 */
int ro__pyproc_wait(ro_pyproc_t *p, int timeout_ms, char *err, size_t errlen);

/* ro__pyproc_text copies the worker's error text (checked, NUL-terminated)
 * into buf; "" when none. */
void ro__pyproc_text(const ro_pyproc_t *p, char *buf, size_t len);

/* ro__pyproc_stop kills and reaps the worker if it runs. */
void ro__pyproc_stop(ro_pyproc_t *p);

/* ro__pyproc_free stops the worker and frees the memory. */
void ro__pyproc_free(ro_pyproc_t *p);

/* ro__pyproc_u32 / ro__pyproc_put_u32 read and write a header word. */
uint32_t ro__pyproc_u32(const ro_pyproc_t *p, size_t off);
void ro__pyproc_put_u32(ro_pyproc_t *p, size_t off, uint32_t v);

#endif
