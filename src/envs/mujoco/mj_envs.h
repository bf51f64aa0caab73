/*
 * MuJoCo env internals for tests and for the fault-injection test plugin:
 * the envs themselves are reached through their vtables (mj_registry.h).
 * Every function takes an instance made by one of those vtables' create().
 */
#ifndef RO_ENVS_MUJOCO_MJ_ENVS_H
#define RO_ENVS_MUJOCO_MJ_ENVS_H

#include <stdint.h>

#include <mujoco/mujoco.h>

/* ro__mj_env_model returns the shared, read-only model of an instance. */
const mjModel *ro__mj_env_model(const void *env);

/* ro__mj_env_data returns the instance's mjData, NULL before its first
 * reset (the data is made there, on the thread that steps it). Only the
 * thread that steps the instance may touch it. */
mjData *ro__mj_env_data(void *env);

/* The reward terms of a step, as Gymnasium's v5 envs put them in `info`:
 * reward_forward = forward, reward_ctrl = -ctrl_cost, reward_contact =
 * -contact_cost, reward_survive = survive (inverted_pendulum: its reward);
 * x_velocity = dx/dt. 0 where an env has no such term. */
typedef struct ro_mj_terms {
    double forward, ctrl_cost, contact_cost, survive, x_velocity;
} ro_mj_terms_t;

/* ro__mj_env_terms copies the reward terms of the instance's last step
 * (all 0 before its first). */
void ro__mj_env_terms(const void *env, ro_mj_terms_t *out);

/* ro__mj_env_dt returns the duration of one env step: the model's timestep
 * times frame_skip. */
double ro__mj_env_dt(const void *env);

/* ro__mj_env_warnings returns how many MuJoCo warnings the instance's steps
 * and resets have raised; ro__mj_env_errors how many MuJoCo errors. */
uint64_t ro__mj_env_warnings(const void *env);
uint64_t ro__mj_env_errors(const void *env);

#endif
