/*
 * Python envs in env worker processes (pyenv_host.h).
 */
#include "envs/pyenv_host.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envs/pyenv_proc.h"
#include "envs/pyenv_proto.h"
#include "envs/pyenv_spec.h"
#include "ro_build_config.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "runtime/text.h"

/* The longest env name (gym:ID or py:MODULE:CALLABLE). */
#define MAX_NAME 200
/* Failures of one process logged with their text; later ones are counted. */
#define LOGGED_FAILURES 8

struct ro_pyhost {
    char name[MAX_NAME + 1];
    ro_env2_vtable_t vt;
    /* Set by configure, read-only after. */
    const char **argv; /* name, "K=V"..., NULL: the worker's argv tail */
    char *argbuf;
    uint32_t nenvs, nprocs, per;
    int timeout_ms;
    ro_pyspec_t spec;
    uint64_t *seeds;                   /* [nenvs] each env's seed (create; its thread) */
    ro_pyproc_t *procs;                /* [nprocs], each under its own lock */
    bool *attached;                    /* [nprocs] under the process's lock */
    uint32_t *logged;                  /* [nprocs] under the process's lock */
    pthread_mutex_t last_lock;         /* guards last_error: any process's failure writes it */
    char last_error[PY_ERR_MAX + 256]; /* the last failure's text ("" if none) */
};

/* One env: its process and row, and the last group step's outcome for it.
 * Owned by the thread that owns the instance. */
typedef struct pyenv {
    ro_pyhost_t *h;
    uint32_t p, row, gen;
    bool stepped;
    bool reseed; /* made after its process's envs: its next reset takes its seed */
    int rc;
    float reward;
    uint8_t term, trunc;
} pyenv_t;

static const char *const no_keys[] = {NULL};

bool ro__pyhost_is_name(const char *name)
{
    return name && (!strncmp(name, "gym:", 4) || !strncmp(name, "py:", 3));
}

/* log_failure writes one line about process p's failure (the worker's
 * text escaped into it), for the first few; the rest are counted only. */
static void log_failure(ro_pyhost_t *h, uint32_t p, const char *what)
{
    pthread_mutex_lock(&h->last_lock);
    snprintf(h->last_error, sizeof h->last_error, "worker %u: %s", p, what);
    pthread_mutex_unlock(&h->last_lock);
    if (h->logged[p]++ >= LOGGED_FAILURES)
        return;
    char shown[4 * PY_ERR_MAX];
    fprintf(stderr, "rollout-node: env '%s': worker %u: %s%s\n", h->name, p,
            ro__text_log(shown, sizeof shown, what, sizeof shown / 4),
            h->logged[p] == LOGGED_FAILURES
                ? " (later failures of this worker: counted, not logged)"
                : "");
}

/* row_of is env row r of process p. */
static uint8_t *row_of(const ro_pyhost_t *h, const ro_pyproc_t *p, uint32_t r)
{
    return p->mem + PY_DATA_OFF + (size_t)r * h->spec.stride;
}

/* rows_of is the number of envs process p hosts. */
static uint32_t rows_of(const ro_pyhost_t *h, uint32_t p)
{
    uint32_t first = p * h->per;
    return first >= h->nenvs ? 0 : h->nenvs - first < h->per ? h->nenvs - first : h->per;
}

/* log_traceback writes a failed command's whole text (a Python
 * traceback), escaped into one line, if the worker wrote one. */
static void log_traceback(ro_pyhost_t *h, uint32_t p)
{
    char text[PY_ERR_MAX];
    ro__pyproc_text(&h->procs[p], text, sizeof text);
    if (text[0])
        log_failure(h, p, text);
}

/* hello waits for process p's spec: the first sets the host's spaces, the
 * others (and restarts) must report the same bytes. */
static int hello(ro_pyhost_t *h, uint32_t p, int timeout_ms, char *err, size_t errlen)
{
    ro_pyproc_t *pp = &h->procs[p];
    int rc = ro__pyproc_wait(pp, timeout_ms, err, errlen);
    if (rc) {
        log_traceback(h, p);
        return rc;
    }
    uint32_t len = ro__pyproc_u32(pp, PY_H_SPEC_LEN);
    if (len > PY_SPEC_MAX)
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s': worker %u's spec is %u bytes", h->name,
                          p, len);
    if (!h->spec.raw)
        return ro__pyspec_read(&h->spec, pp->mem + PY_SPEC_OFF, len, h->name, err, errlen);
    if (len != h->spec.raw_len || memcmp(pp->mem + PY_SPEC_OFF, h->spec.raw, len) != 0)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': worker %u reports other spaces than "
                          "worker 0; every env of a run must have the same spaces",
                          h->name, p);
    return 0;
}

/* write_header tells process p where its rows and their fields are, and
 * each row's seed (the env's own; mixed with the process's start count
 * after a restart, so that a restarted env does not replay its episodes). */
static void write_header(ro_pyhost_t *h, uint32_t p)
{
    ro_pyproc_t *pp = &h->procs[p];
    const ro_pyspec_t *s = &h->spec;
    ro__pyproc_put_u32(pp, PY_H_NENVS, rows_of(h, p));
    ro__pyproc_put_u32(pp, PY_H_STRIDE, s->stride);
    ro__pyproc_put_u32(pp, PY_H_DATA_OFF, PY_DATA_OFF);
    ro__pyproc_put_u32(pp, PY_H_OFF_ACT_I, s->off_act_i);
    ro__pyproc_put_u32(pp, PY_H_OFF_ACT_F, s->off_act_f);
    ro__pyproc_put_u32(pp, PY_H_OFF_REWARD, s->off_reward);
    ro__pyproc_put_u32(pp, PY_H_OFF_FLAGS, s->off_flags);
    ro__pyproc_put_u32(pp, PY_H_OFF_SEED, s->off_seed);
    for (uint32_t k = 0; k < s->sp.num_obs; k++) {
        ro__pyproc_put_u32(pp, PY_H_OFF_OBS + 4 * k, s->off_obs[k]);
        ro__pyproc_put_u32(pp, PY_H_OFF_RESET + 4 * k, s->off_reset[k]);
    }
    for (uint32_t r = 0; r < rows_of(h, p); r++) {
        uint8_t *row = row_of(h, pp, r);
        uint64_t seed = h->seeds[p * h->per + r];
        if (pp->gen > 1)
            seed = ro__seed_mix(seed, pp->gen, RO_STREAM_ENV);
        memcpy(row + s->off_seed, &seed, sizeof seed);
        memset(row + s->off_flags, 0, PY_FLAGS);
    }
}

/* attach makes process p's envs (its first command after hello). Under
 * its lock. */
static int attach(ro_pyhost_t *h, uint32_t p, char *err, size_t errlen)
{
    ro_pyproc_t *pp = &h->procs[p];
    int rc = ro__pyproc_grow(pp, PY_DATA_OFF + (size_t)rows_of(h, p) * h->spec.stride, err, errlen);
    if (rc)
        return rc;
    write_header(h, p);
    if ((rc = ro__pyproc_post(pp, PY_OP_ATTACH)) == 0 &&
        (rc = ro__pyproc_wait(pp, h->timeout_ms * 10, err, errlen)) != 0)
        log_traceback(h, p);
    h->attached[p] = rc == 0;
    return rc;
}

/* The interpreter the workers run, and the folder they import
 * rollout_client from (in front of PYTHONPATH): this build's, unless the
 * caller names others (rollout_client sets both to its own when it makes
 * Python envs: an installed package's workers import it, not the source
 * tree it was built from). */
static const char *worker_python(void)
{
    return getenv("ROLLOUT_PYTHON") ? getenv("ROLLOUT_PYTHON") : RO_PYTHON;
}

static const char *worker_pythonpath(void)
{
    return getenv("ROLLOUT_PYTHONPATH") ? getenv("ROLLOUT_PYTHONPATH") : RO_PYTHON_SRC;
}

/* restart starts process p again after a failure (what), makes its envs
 * and resets them: every env it hosts then fails its next step. Under its
 * lock. */
static void restart(ro_pyhost_t *h, uint32_t p, const char *what)
{
    char line[PY_ERR_MAX + 512];
    snprintf(line, sizeof line, "%s; restarting it", what);
    log_failure(h, p, line);
    ro_pyproc_t *pp = &h->procs[p];
    h->attached[p] = false;
    char err[PY_ERR_MAX + 256];
    int rc = ro__pyproc_spawn(pp, worker_python(), worker_pythonpath(), h->argv, err, sizeof err);
    if (rc == 0)
        rc = hello(h, p, h->timeout_ms * 10, err, sizeof err);
    if (rc == 0)
        rc = attach(h, p, err, sizeof err);
    if (rc) {
        ro__pyproc_stop(pp);
        log_failure(h, p, err); /* tried again at its next command */
    }
}

/* ready makes sure process p runs with its envs made. Under its lock. */
static int ready(ro_pyhost_t *h, uint32_t p)
{
    char err[PY_ERR_MAX + 256];
    if (h->attached[p] && h->procs[p].pid > 0)
        return 0;
    if (h->procs[p].pid > 0 && attach(h, p, err, sizeof err) == 0)
        return 0;
    if (h->procs[p].pid > 0)
        ro__pyproc_stop(&h->procs[p]);
    restart(h, p, h->procs[p].gen ? "its worker is not running" : "no worker");
    return h->attached[p] ? 0 : RO_EIO;
}

/* post hands process p command op (rows written); 0, or a failure after
 * which the process is restarted. Under its lock. */
static int post(ro_pyhost_t *h, uint32_t p, uint32_t op)
{
    if (ro__pyproc_post(&h->procs[p], op) == 0)
        return 0;
    char err[64];
    snprintf(err, sizeof err, "python env worker %u: cannot wake it", p);
    ro__pyproc_stop(&h->procs[p]);
    restart(h, p, err);
    return RO_EIO;
}

/* finish waits for process p's posted command; a failure restarts it.
 * Under its lock. */
static int finish(ro_pyhost_t *h, uint32_t p)
{
    char err[PY_ERR_MAX + 256];
    int rc = ro__pyproc_wait(&h->procs[p], h->timeout_ms, err, sizeof err);
    if (rc) {
        log_traceback(h, p);
        ro__pyproc_stop(&h->procs[p]);
        restart(h, p, err);
    }
    return rc;
}

/* command runs op on process p (rows written); a failure restarts it.
 * Under its lock. */
static int command(ro_pyhost_t *h, uint32_t p, uint32_t op)
{
    int rc = post(h, p, op);
    return rc ? rc : finish(h, p);
}

/* outcome reads env e's row after a step: its flags checked (the worker
 * may write anything), the reward copied. */
static void outcome(pyenv_t *e, const ro_pyproc_t *pp)
{
    const ro_pyspec_t *s = &e->h->spec;
    uint8_t *row = row_of(e->h, pp, e->row), f[PY_FLAGS];
    memcpy(f, row + s->off_flags, sizeof f);
    memcpy(&e->reward, row + s->off_reward, sizeof e->reward);
    e->term = f[PY_F_TERM];
    e->trunc = f[PY_F_TRUNC];
    e->rc = 0;
    if (f[PY_F_FAILED] || f[PY_F_GO] || e->term > 1 || e->trunc > 1)
        e->rc = f[PY_F_FAILED] ? RO_EIO : RO_EPROTO;
    row[s->off_flags + PY_F_FAILED] = 0;
}

/* An instance's rc while its row is in a posted command (never a
 * step()'s: outcome or a failure replaces it). */
#define IN_COMMAND 1

/* A run of a group: instances [b, e) of one process, its command posted
 * (or not: nothing to step, or it failed). */
typedef struct run {
    uint32_t p, b, e;
    bool posted;
} run_t;

/* The most runs posted before the first is waited for. */
#define MAX_RUNS 64

/* begin_run locks run r's process, writes its instances' actions into
 * their rows and posts one STEP (the lock is held until end_run). */
static void begin_run(pyenv_t *const *envs, run_t *r, const int32_t *disc, const float *box,
                      const uint8_t *skip)
{
    ro_pyhost_t *h = envs[r->b]->h;
    ro_pyproc_t *pp = &h->procs[r->p];
    const ro_pyspec_t *s = &h->spec;
    pthread_mutex_lock(&pp->lock);
    int rc = ready(h, r->p);
    uint32_t go = 0;
    for (uint32_t j = r->b; j < r->e; j++) {
        pyenv_t *e = envs[j];
        if (skip && skip[j])
            continue;
        e->stepped = true;
        e->rc = RO_EIO;
        if (rc || e->gen != pp->gen) { /* restarted since: this env was reset there */
            e->gen = pp->gen;
            continue;
        }
        uint8_t *row = row_of(h, pp, e->row);
        if (s->ndisc)
            memcpy(row + s->off_act_i, disc + (size_t)j * s->ndisc, 4 * (size_t)s->ndisc);
        if (s->nbox)
            memcpy(row + s->off_act_f, box + (size_t)j * s->nbox, 4 * (size_t)s->nbox);
        row[s->off_flags + PY_F_GO] = 1;
        e->rc = IN_COMMAND;
        go++;
    }
    r->posted = go && post(h, r->p, PY_OP_STEP) == 0;
    if (go && !r->posted)
        for (uint32_t j = r->b; j < r->e; j++)
            if (envs[j]->rc == IN_COMMAND) {
                envs[j]->rc = RO_EIO;
                envs[j]->gen = pp->gen; /* their rows were reset by the restart */
            }
}

/* end_run waits for run r's command, reads its instances' outcomes and
 * unlocks its process. */
static void end_run(pyenv_t *const *envs, const run_t *r)
{
    ro_pyhost_t *h = envs[r->b]->h;
    ro_pyproc_t *pp = &h->procs[r->p];
    if (r->posted && finish(h, r->p) == 0) {
        char text[PY_ERR_MAX];
        for (uint32_t j = r->b; j < r->e; j++)
            if (envs[j]->rc == IN_COMMAND)
                outcome(envs[j], pp);
        ro__pyproc_text(pp, text, sizeof text);
        if (text[0]) /* an env raised: it was made again and reset */
            log_failure(h, r->p, text);
    } else if (r->posted) {
        for (uint32_t j = r->b; j < r->e; j++)
            if (envs[j]->rc == IN_COMMAND) {
                envs[j]->rc = RO_EIO;
                envs[j]->gen = pp->gen; /* their rows were reset by the restart */
            }
    }
    pthread_mutex_unlock(&pp->lock);
}

void ro__pyhost_step_group(void *const *envs, uint32_t n, const int32_t *disc, const float *box,
                           const uint8_t *skip)
{
    pyenv_t *const *es = (pyenv_t *const *)envs;
    /* Every process's command is posted before the first is waited for:
     * they step side by side, one hand-over each way. A run of one process per
     * command; processes locked in increasing order (two threads' groups
     * never wait on each other's locks in a cycle): a run of a process not
     * above the last locked one waits until the runs posted are done. */
    run_t runs[MAX_RUNS];
    uint32_t nruns = 0;
    for (uint32_t j = 0; j < n;) {
        const uint32_t p = es[j]->p, b = j;
        while (j < n && es[j]->p == p)
            j++;
        if (nruns && (nruns == MAX_RUNS || p <= runs[nruns - 1].p)) {
            for (uint32_t r = 0; r < nruns; r++)
                end_run(es, &runs[r]);
            nruns = 0;
        }
        runs[nruns] = (run_t){.p = p, .b = b, .e = j};
        begin_run(es, &runs[nruns++], disc, box, skip);
    }
    for (uint32_t r = 0; r < nruns; r++)
        end_run(es, &runs[r]);
}

/* --- the vtable --- */

static int py_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                     size_t errlen)
{
    (void)out, (void)args, (void)nargs, (void)seed;
    return ro__errorf(err, errlen, RO_ENOTSUP, "a Python env is made through its kind");
}

static void py_spaces(void *env, ro_env_spaces_t *out)
{
    const pyenv_t *e = env;
    uint32_t size = out->size;
    *out = e->h->spec.sp;
    out->size = size;
}

/* copy_obs copies env e's observation (area: off_obs or off_reset) into
 * the caller's tensors. */
static void copy_obs(const pyenv_t *e, const uint32_t *area, const ro_obs_out_t *obs)
{
    const ro_pyspec_t *s = &e->h->spec;
    const uint8_t *row = row_of(e->h, &e->h->procs[e->p], e->row);
    for (uint32_t k = 0; k < s->sp.num_obs; k++)
        memcpy(obs->tensors[k], row + area[k], s->row_bytes[k]);
}

static void py_reset(void *env, const ro_obs_out_t *obs)
{
    pyenv_t *e = env;
    ro_pyhost_t *h = e->h;
    ro_pyproc_t *pp = &h->procs[e->p];
    const ro_pyspec_t *s = &h->spec;
    pthread_mutex_lock(&pp->lock);
    bool ok = ready(h, e->p) == 0;
    e->gen = pp->gen;
    uint8_t *row = ok ? row_of(h, pp, e->row) : NULL;
    if (ok && (e->reseed || !row[s->off_flags + PY_F_RESET_READY])) {
        row[s->off_flags + PY_F_GO] = 1;
        if (e->reseed) {
            memcpy(row + s->off_seed, &h->seeds[e->p * h->per + e->row], sizeof(uint64_t));
            row[s->off_flags + PY_F_SEED] = 1;
            e->reseed = false;
        }
        ok = command(h, e->p, PY_OP_RESET) == 0 || h->attached[e->p];
        e->gen = pp->gen;
    }
    if (ok && row[s->off_flags + PY_F_RESET_READY]) {
        copy_obs(e, s->off_reset, obs);
        row[s->off_flags + PY_F_RESET_READY] = 0;
    } else {
        for (uint32_t k = 0; k < s->sp.num_obs; k++) /* no worker: zeros, and a failed step */
            memset(obs->tensors[k], 0, s->row_bytes[k]);
        e->gen = pp->gen - 1;
    }
    pthread_mutex_unlock(&pp->lock);
}

static int py_step(void *env, const ro_actions_t *act, const ro_obs_out_t *obs, ro_step_t *out)
{
    pyenv_t *e = env;
    if (!e->stepped)
        ro__pyhost_step_group((void *const *)&env, 1, act->discrete, act->box, NULL);
    e->stepped = false;
    if (e->rc) {
        return e->rc;
    }
    /* The row is this env's alone until its next command (the mapping
     * never moves once made): copied, then checked by the caller. */
    copy_obs(e, e->h->spec.off_obs, obs);
    out->reward = e->reward;
    out->terminated = e->term;
    out->truncated = e->trunc;
    return 0;
}

static void py_destroy(void *env)
{
    free(env);
}

/* --- the host --- */

int ro__pyhost_open(ro_pyhost_t **out, const char *name, char *err, size_t errlen)
{
    *out = NULL;
    size_t len = strlen(name);
    const char *id = strchr(name, ':') + 1;
    if (len > MAX_NAME || !*id)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%.40s...': a Python env's name is "
                          "gym:ID or py:MODULE:CALLABLE, at most %d bytes",
                          name, MAX_NAME);
    for (const char *c = name; *c; c++)
        if (*c <= ' ' || *c > '~')
            return ro__errorf(err, errlen, RO_EINVAL,
                              "env name: byte 0x%02x at %zu is not "
                              "printable ASCII",
                              (unsigned)(unsigned char)*c, (size_t)(c - name));
    ro_pyhost_t *h = calloc(1, sizeof *h);
    if (!h)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory");
    memcpy(h->name, name, len + 1);
    pthread_mutex_init(&h->last_lock, NULL);
    h->vt = (ro_env2_vtable_t){
        .abi_version = RO_ENV_ABI2_VERSION,
        .size = sizeof h->vt,
        .name = h->name,
        .arg_keys = no_keys,
        .create = py_create,
        .spaces = py_spaces,
        .reset = py_reset,
        .step = py_step,
        .destroy = py_destroy,
    };
    *out = h;
    return 0;
}

const ro_env2_vtable_t *ro__pyhost_vtable(const ro_pyhost_t *h)
{
    return &h->vt;
}

/* make_argv builds the worker's argv tail: the name, then "K=V" each. */
static int make_argv(ro_pyhost_t *h, const ro_env_arg_t *args, size_t nargs)
{
    size_t bytes = 0;
    for (size_t i = 0; i < nargs; i++)
        bytes += strlen(args[i].key) + strlen(args[i].value) + 2;
    h->argv = calloc(nargs + 2, sizeof *h->argv);
    h->argbuf = malloc(bytes + 1);
    if (!h->argv || !h->argbuf)
        return RO_ENOMEM;
    h->argv[0] = h->name;
    char *at = h->argbuf;
    for (size_t i = 0; i < nargs; i++) {
        h->argv[i + 1] = at;
        at += sprintf(at, "%s=%s", args[i].key, args[i].value) + 1;
    }
    return 0;
}

/* pinned_cpu is the CPU process p of nprocs is pinned to, of the ncpus in
 * cpus (the CPUs the node may run on): the p-th of them when the pool has
 * one process per CPU (the default), so two workers never share a CPU
 * while another idles (the kernel's balancer, seeing the caller's thread
 * as a third busy task on 2 CPUs, put both on one; pinned, CartPole gave
 * 3-16 % more steps in 9 of 9 paired runs of 8 and 64 envs, Pendulum as
 * many as unpinned). -1 (not
 * pinned) for any other pool: it shares its CPUs with whatever else the
 * user runs, and the kernel places it. */
static int pinned_cpu(const cpu_set_t *cpus, uint32_t ncpus, uint32_t nprocs, uint32_t p)
{
    if (ncpus == 0 || nprocs != ncpus)
        return -1;
    for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, cpus) && (uint32_t)seen++ == p)
            return c;
    return -1;
}

int ro__pyhost_configure(ro_pyhost_t *h, const ro_env_arg_t *args, size_t nargs, uint32_t nenvs,
                         uint32_t nprocs, uint32_t timeout_ms, char *err, size_t errlen)
{
    if (h->procs)
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s': configured twice", h->name);
    if (nenvs > RO_PYENV_MAX_ENVS) /* a file's word, maybe: bounded before it sizes anything */
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s': %u envs; at most %u", h->name, nenvs,
                          RO_PYENV_MAX_ENVS);
    nenvs = nenvs ? nenvs : 1;
    cpu_set_t cpus;
    const uint32_t ncpus =
        sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? (uint32_t)CPU_COUNT(&cpus) : 0;
    if (nprocs == 0) /* one per CPU this process may run on */
        nprocs = ncpus ? ncpus : 1;
    nprocs = nprocs > nenvs ? nenvs : nprocs;
    h->nenvs = nenvs;
    h->per = (nenvs + nprocs - 1) / nprocs;
    h->nprocs = (nenvs + h->per - 1) / h->per;
    h->timeout_ms = (int)(timeout_ms ? timeout_ms : RO_PYENV_TIMEOUT_S * 1000u);
    h->seeds = calloc(nenvs, sizeof *h->seeds);
    h->procs = calloc(h->nprocs, sizeof *h->procs);
    h->attached = calloc(h->nprocs, sizeof *h->attached);
    h->logged = calloc(h->nprocs, sizeof *h->logged);
    if (!h->seeds || !h->procs || !h->attached || !h->logged || make_argv(h, args, nargs))
        return ro__errorf(err, errlen, RO_ENOMEM, "env '%s': out of memory", h->name);
    for (uint32_t i = 0; i < nenvs; i++)
        h->seeds[i] = ro__seed_mix(0, i, RO_STREAM_ENV);
    int rc = 0;
    /* Every process starts at once; their interpreters load side by side. */
    for (uint32_t p = 0; p < h->nprocs && rc == 0; p++) {
        if ((rc = ro__pyproc_init(&h->procs[p], p, err, errlen)) != 0)
            break;
        h->procs[p].cpu = pinned_cpu(&cpus, ncpus, h->nprocs, p);
        rc = ro__pyproc_spawn(&h->procs[p], worker_python(), worker_pythonpath(), h->argv, err,
                              errlen);
    }
    for (uint32_t p = 0; p < h->nprocs && rc == 0; p++)
        rc = hello(h, p, h->timeout_ms * 10, err, errlen);
    return rc;
}

int ro__pyhost_create(ro_pyhost_t *h, void **env, uint64_t seed, uint32_t index, char *err,
                      size_t errlen)
{
    *env = NULL;
    if (!h->procs)
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s': no worker processes", h->name);
    if (index >= h->nenvs)
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s': env %u of %u", h->name, index,
                          h->nenvs);
    pyenv_t *e = calloc(1, sizeof *e);
    if (!e)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory");
    e->h = h;
    e->p = index / h->per;
    e->row = index % h->per;
    /* Before the process's first command (attach reads it), or a restart's. */
    pthread_mutex_lock(&h->procs[e->p].lock);
    h->seeds[index] = seed;
    e->gen = h->procs[e->p].gen;
    e->reseed = h->attached[e->p];
    pthread_mutex_unlock(&h->procs[e->p].lock);
    *env = e;
    return 0;
}

void ro__pyhost_last_error(ro_pyhost_t *h, char *buf, size_t len)
{
    pthread_mutex_lock(&h->last_lock);
    snprintf(buf, len, "%s", h->last_error);
    pthread_mutex_unlock(&h->last_lock);
}

uint32_t ro__pyhost_group(const ro_pyhost_t *h)
{
    return h->per;
}

void ro__pyhost_close(ro_pyhost_t *h)
{
    if (!h)
        return;
    for (uint32_t p = 0; h->procs && p < h->nprocs; p++)
        if (h->procs[p].mem)
            ro__pyproc_free(&h->procs[p]);
    ro__pyspec_free(&h->spec);
    free(h->procs);
    free(h->attached);
    free(h->logged);
    free(h->seeds);
    free(h->argv);
    free(h->argbuf);
    pthread_mutex_destroy(&h->last_lock);
    free(h);
}
