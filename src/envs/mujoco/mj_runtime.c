/*
 * The MuJoCo envs' shared models and error handlers (mj_runtime.h).
 *
 * This is the one place with process-wide mutable state in the envs, for
 * two reasons outside our control: MuJoCo's handlers are global function
 * pointers with no context argument, and the point of sharing one mjModel
 * is that it outlives any one instance. Both are guarded: the handlers are
 * set once (pthread_once) and only read afterwards; the model table is
 * under a mutex, touched at create() and destroy() only, never per step.
 */
#include "envs/mujoco/mj_runtime.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/mujoco/mj_models.h"
#include "runtime/error.h"

/* More than the embedded models we ship; checked at run time. */
#define MAX_MODELS 16

/*
 * Per thread: the guard armed on this thread (NULL when none) and the last
 * error caught here. A worker runs one env step at a time, so one slot per
 * thread is enough; it is thread-local because MuJoCo's error callback
 * gives us nothing but the message.
 */
static _Thread_local jmp_buf *guard_jmp;
static _Thread_local char last_error[256];
/* Set while this thread compiles a model: the compiler's warnings (e.g.
 * Gymnasium's half_cheetah.xml uses the deprecated settotalmass) are about
 * the model file, not a simulation, and are not counted. */
static _Thread_local bool compiling;

/* Relaxed: a statistic, read for reports only. */
static _Atomic uint64_t warnings_seen;

static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

/* The shared models, one slot per embedded file. Under models_lock. */
typedef struct shared_model {
    mjModel *m;
    unsigned users;
} shared_model_t;

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_model_t models[MAX_MODELS];

static void on_error(const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg);
    jmp_buf *j = guard_jmp;
    if (j != NULL) {
        guard_jmp = NULL;
        longjmp(*j, 1);
    }
    /* Not inside a step: MuJoCo cannot go on past an error, and unwinding
     * the C++ model compiler with longjmp is undefined. Say why and stop. */
    fprintf(stderr, "rollout: MuJoCo error outside an env step (cannot continue): %s\n", msg);
    abort();
}

static void on_warning(const char *msg)
{
    (void)msg;
    if (compiling)
        return;
    /* Counted, not printed: MuJoCo would print (and log to a file in the
     * current directory) from inside a worker's step. The envs count the
     * warnings of each instance from its mjData. */
    atomic_fetch_add_explicit(&warnings_seen, 1, memory_order_relaxed);
}

static void install_handlers(void)
{
    mju_user_error = on_error;
    mju_user_warning = on_warning;
}

/*
 * timers_off clears MuJoCo's timer callback, process-wide, when something
 * set it: MuJoCo then calls it twice per pipeline stage of every mj_step,
 * to fill MjData.timer, which no env reads. The Python bindings set it at
 * `import mujoco` (Gymnasium's own MuJoCo envs import them), and it made a
 * Hopper step cost 1.2x the same step without it (docs/env-api.md). Checked
 * at every guard, not once: the import may come after our first step.
 */
static void timers_off(void)
{
    /* Relaxed: the pointer is MuJoCo's plain global (its header declares
     * it, so no _Atomic), read by every mj_step; the GCC builtins make our
     * accesses atomic, and nothing is ordered by it. */
    if (__atomic_load_n(&mjcb_time, __ATOMIC_RELAXED) != NULL)
        __atomic_store_n(&mjcb_time, NULL, __ATOMIC_RELAXED);
}

int ro__mj_guard(void (*fn)(void *), void *arg)
{
    /* Once set, a load per call: the handlers must be ours before MuJoCo
     * can raise anything inside fn. */
    pthread_once(&handlers_once, install_handlers);
    timers_off();
    /* prev is not written after setjmp, so it keeps its value across the
     * longjmp; restoring it lets a guard run inside another. */
    jmp_buf *prev = guard_jmp;
    jmp_buf jb;
    if (setjmp(jb) != 0) {
        guard_jmp = prev; /* on_error disarmed the guard before jumping here */
        return RO_EIO;
    }
    guard_jmp = &jb;
    fn(arg);
    guard_jmp = prev;
    return 0;
}

const char *ro__mj_last_error(void)
{
    return last_error;
}

uint64_t ro__mj_warnings(void)
{
    return atomic_load_explicit(&warnings_seen, memory_order_relaxed);
}

/* load_embedded compiles one embedded model from memory: the file goes into
 * a virtual file system of its own, so mj_loadXML never opens a file. */
static mjModel *load_embedded(const ro_mj_embedded_t *e, char *err, size_t errlen)
{
    mjVFS vfs; /* MuJoCo 4: a handle; the files live in MuJoCo's memory */
    mj_defaultVFS(&vfs);
    mjModel *m = NULL;
    if (e->len > (size_t)INT32_MAX || mj_addBufferVFS(&vfs, e->name, e->xml, (int)e->len) != 0) {
        ro__errorf(err, errlen, RO_ENOMEM, "cannot put MuJoCo model %s into a virtual file",
                   e->name);
        goto done;
    }
    char why[512] = "";
    compiling = true;
    m = mj_loadXML(e->name, &vfs, why, sizeof why);
    compiling = false;
    if (m == NULL)
        ro__errorf(err, errlen, RO_EINVAL, "cannot compile the built-in MuJoCo model %s: %s",
                   e->name, why[0] ? why : "no reason given");
done:
    mj_deleteVFS(&vfs);
    return m;
}

/* version_matches: the library the process loaded is the one the envs were
 * compiled against (the rpath names its folder; a library swapped there, or
 * one found first through LD_LIBRARY_PATH, could differ in its structs). */
static int version_matches(char *err, size_t errlen)
{
    if (mj_version() == mjVERSION_HEADER)
        return 0;
    return ro__errorf(err, errlen, RO_ENOTSUP,
                      "the MuJoCo library loaded is version %s (%d), but rollout was built "
                      "against MuJoCo header %d: rebuild, or unset LD_LIBRARY_PATH",
                      mj_versionString(), mj_version(), mjVERSION_HEADER);
}

const char *ro__mj_version_string(void)
{
    return mj_versionString();
}

int ro__mj_model_acquire(const char *file, const mjModel **out, char *err, size_t errlen)
{
    pthread_once(&handlers_once, install_handlers);
    size_t idx = ro__mj_nmodels;
    for (size_t i = 0; i < ro__mj_nmodels; i++)
        if (strcmp(ro__mj_models[i].name, file) == 0)
            idx = i;
    if (idx == ro__mj_nmodels || idx >= MAX_MODELS)
        return ro__errorf(err, errlen, RO_ENOENT, "no built-in MuJoCo model named %s", file);
    if (version_matches(err, errlen) < 0)
        return RO_ENOTSUP;

    int rc = 0;
    pthread_mutex_lock(&models_lock);
    shared_model_t *s = &models[idx];
    if (s->users == 0) {
        s->m = load_embedded(&ro__mj_models[idx], err, errlen);
        if (s->m == NULL)
            rc = RO_EINVAL;
    }
    if (rc == 0) {
        s->users++;
        *out = s->m;
    }
    pthread_mutex_unlock(&models_lock);
    return rc;
}

void ro__mj_model_release(const mjModel *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&models_lock);
    for (size_t i = 0; i < MAX_MODELS; i++) {
        shared_model_t *s = &models[i];
        if (s->users == 0 || s->m != m)
            continue;
        if (--s->users == 0) {
            mj_deleteModel(s->m);
            s->m = NULL;
        }
        break;
    }
    pthread_mutex_unlock(&models_lock);
}
