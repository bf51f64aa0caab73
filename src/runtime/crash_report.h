/*
 * A clear last word when an env crashes the process.
 *
 * Env code (built-in or a plugin) runs inside the node's workers; a bug in
 * it (SIGSEGV, SIGBUS, SIGFPE, SIGILL) takes the whole process down, as it
 * must: the env's memory may be corrupt. Before it goes, the handler writes
 * one line naming the signal, the env kind, the env index and the step of
 * its episode, from a per-thread record the env actor keeps while it steps.
 * Then the default action runs (the exit status of the signal; no core
 * file, since the node is not dumpable: runtime/shared_mem.h).
 */
#ifndef RO_CRASH_REPORT_H
#define RO_CRASH_REPORT_H

#include <stdint.h>

/* What the thread is doing, for the report. Written only by its thread. */
typedef struct ro_crash_ctx {
    const char *env_name; /* NULL: not inside env code */
    const char *what;     /* "step", "reset", "create" */
    uint32_t env;         /* env index */
    uint64_t episode;
    uint32_t step; /* step of the episode being taken (1-based) */
} ro_crash_ctx_t;

/*
 * The thread's record. Thread-local rather than in the node object: the
 * signal handler can reach nothing else. Only its own thread writes it, and
 * the handler runs on that thread.
 */
extern _Thread_local ro_crash_ctx_t ro__crash_ctx;

/* ro__crash_report_install sets the handlers. Main thread, once. */
void ro__crash_report_install(void);

#endif
