/* engine.h: what the files of rollout_client._engine share (the module is
 * described in engine.c). Internal to the extension: ro__eng_ names. */
#ifndef RO_ENGINE_H
#define RO_ENGINE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
/* One numpy C-API table for the extension's files: engine.c imports it. */
#define PY_ARRAY_UNIQUE_SYMBOL ro_engine_ARRAY_API
#ifndef RO_ENGINE_MODULE
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <stdint.h>

#include "vecenv/vec.h"

typedef struct {
    PyObject_HEAD ro_vec_t *v;
    int busy;      /* a call runs with the GIL released */
    uint32_t *ids; /* [n]: the envs of the last recv() */
    int last_recv; /* the last results came from recv(): rows ids[0..batch) */
    void *cycle;   /* run_steps' action batches (ro__eng_take_cycle), or NULL */
    uint32_t cycle_m;
} EngineObject;

/* ro__eng_rows returns rows ids[0..k) (ids NULL: rows 0..k-1) of every
 * observation tensor of bufs as new arrays: one array for one tensor, a
 * tuple for several. */
PyObject *ro__eng_tensors(const ro_vec_t *v, uint8_t *const *bufs, const uint32_t *ids, uint32_t k);

/* ro__eng_bools and ro__eng_doubles: rows ids[0..k) of a per-env array as a
 * new bool / float64 array (ids NULL: rows 0..k-1). */
PyObject *ro__eng_bools(const uint8_t *x, const uint32_t *ids, uint32_t k);
PyObject *ro__eng_doubles(const double *x, const uint32_t *ids, uint32_t k);

/* ro__eng_take_actions checks a batch of actions for k envs (k rows: disc
 * of the discrete parts, box of the box parts; None where the env has none)
 * and writes row i into env ids[i]'s action rows (ids NULL: env i). -1 with
 * TypeError or ValueError naming the problem; nothing is half-written that
 * a step could read, since no step runs until it succeeds. */
int ro__eng_take_actions(ro_vec_t *v, PyObject *disc, PyObject *box, const uint32_t *ids,
                         uint32_t k);

/* ro__eng_take_cycle checks a sequence of m action batches of every env,
 * each a (discrete, box) pair as step() takes, and copies them into one new
 * block (*out, free() it; *m its batches): the actions run_steps cycles
 * through. Leaves the engine's action rows at the last batch. 0, or -1 with
 * a Python error naming the problem. */
int ro__eng_take_cycle(ro_vec_t *v, PyObject *batches, void **out, uint32_t *m);

/* ro__eng_put_cycle writes batch j of a block of ro__eng_take_cycle into
 * the engine's action rows. No Python: runs without the GIL. */
void ro__eng_put_cycle(ro_vec_t *v, const void *block, uint32_t j);

#endif
