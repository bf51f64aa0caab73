/*
 * CartPole internals for tests: the env itself is only reached through
 * ro__env_cartpole (env_registry.h).
 */
#ifndef RO_ENVS_CARTPOLE_H
#define RO_ENVS_CARTPOLE_H

/* ro__cartpole_get_state copies the float64 state [x, x_dot, theta,
 * theta_dot] of an instance, so tests can check it beyond float32. */
void ro__cartpole_get_state(const void *env, double state[4]);

/* ro__cartpole_set_state puts an instance in a given state, so tests can
 * step from a state whose next state they worked out by hand. */
void ro__cartpole_set_state(void *env, const double state[4]);

#endif
