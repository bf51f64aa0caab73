/*
 * What the MuJoCo envs share: the process's models and MuJoCo's error and
 * warning handlers.
 *
 * Models: one mjModel per embedded model file per process (a node is one
 * process), loaded from memory on first use and shared read-only by every
 * instance on every worker; a count of users frees it when the last
 * instance is destroyed.
 *
 * Errors: MuJoCo's default error handler prints and exit()s the process, and
 * its warning handler prints and appends to MUJOCO_LOG.TXT in the current
 * directory. This module installs, once per process, handlers that do
 * neither: an error inside ro__mj_guard() unwinds (longjmp) to the guard,
 * which returns RO_EIO, so that one env fails and the node goes on; an error
 * anywhere else (model loading, which runs C++ code that must not be
 * longjmp'd over) is a bug or an exhausted machine and aborts with the
 * message. Warnings are counted, never printed.
 *
 * MuJoCo's handler pointers are process-wide: a plugin that also uses
 * MuJoCo in the same process shares them.
 *
 * Timers: MuJoCo's timer callback (mjcb_time, also process-wide) is cleared
 * before every guarded call when something set it (`import mujoco` does):
 * it would time every stage of every step into timers no env reads.
 */
#ifndef RO_ENVS_MUJOCO_MJ_RUNTIME_H
#define RO_ENVS_MUJOCO_MJ_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <mujoco/mujoco.h>

/*
 * ro__mj_model_acquire returns in *out the shared model loaded from the
 * embedded file `file` (e.g. "hopper.xml"), loading it if no instance holds
 * it. Installs the handlers first. Each success is paired with one
 * ro__mj_model_release. On failure returns a negative code and writes a
 * message into err. Any thread (a mutex guards the table).
 */
int ro__mj_model_acquire(const char *file, const mjModel **out, char *err, size_t errlen);

/* ro__mj_model_release gives back one use of a model from
 * ro__mj_model_acquire; the last use frees it. Any thread. */
void ro__mj_model_release(const mjModel *m);

/*
 * ro__mj_guard runs fn(arg) with MuJoCo errors turned into a return code:
 * 0, or RO_EIO when MuJoCo raised an error inside fn (the call was cut
 * short where the error happened; whatever mjData fn worked on must be
 * reset before it is used again). The message is kept for
 * ro__mj_last_error. Clears MuJoCo's timer callback first. Guards may
 * nest. Any thread.
 */
int ro__mj_guard(void (*fn)(void *), void *arg);

/* ro__mj_last_error returns the message of the last MuJoCo error caught on
 * this thread ("" if none). */
const char *ro__mj_last_error(void);

/* ro__mj_warnings returns how many MuJoCo warnings this process has seen
 * (all threads; relaxed: a statistic). */
uint64_t ro__mj_warnings(void);

/* ro__mj_version_string returns the loaded MuJoCo library's version, e.g.
 * "4.0.0". Any thread. */
const char *ro__mj_version_string(void);

#endif
