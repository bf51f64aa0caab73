/*
 * The machine's limit for MuJoCo envs (bench_mujoco, bench_gym.py): a raw
 * loop over n simulations of an env's model, each its own mjData as each
 * env has, uniform random controls, mj_step x frame skip per env step (ant:
 * then mj_rnePostConstraint) and the env's own termination test and reset
 * (mj_resetData, the same noise, mj_forward), so that it visits the states
 * and touches the memory the envs do; no observations, rewards, actors,
 * messages or Python.
 */
#ifndef RO_BENCH_MJ_RAW_H
#define RO_BENCH_MJ_RAW_H

#include <stdint.h>

#include "envs/registry.h"

/* bench_mj_probe opens env (a built-in name) into *kind and makes one
 * instance with seed 1 into *probe (a MuJoCo env's holds the shared model);
 * exits with a message naming `who` when either fails. */
void bench_mj_probe(const char *who, const char *env, ro_env_kind_t *kind, void **probe);

/*
 * bench_mj_raw runs the raw loop for about `seconds` and returns env steps
 * per second; *cpu gets the process's CPU seconds per env step. threads 1:
 * on the calling thread. threads T > 1: T threads, each pinned to one of the
 * allowed CPUs, with n / T simulations each (made on that thread), and a
 * spin barrier after every step of all of them: what a synchronous vector
 * step (Gymnasium's step(): every env's result before it returns) costs at
 * the least on these CPUs, with a static split and no work moved between
 * threads. Exits with a message when the env or memory is missing.
 */
double bench_mj_raw(const char *env, uint32_t n, uint32_t threads, double seconds, double *cpu);

#endif
