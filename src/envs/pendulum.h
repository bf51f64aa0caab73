/*
 * Pendulum internals for tests: the env itself is only reached through
 * ro__env_pendulum (env_registry.h).
 */
#ifndef RO_ENVS_PENDULUM_H
#define RO_ENVS_PENDULUM_H

/* ro__pendulum_get_state copies the float64 state [th, thdot]. */
void ro__pendulum_get_state(const void *env, double state[2]);

/* ro__pendulum_set_state puts an instance in a given state, so tests can
 * step from a state whose next state they worked out by hand. */
void ro__pendulum_set_state(void *env, const double state[2]);

/* ro__pendulum_angle_normalize maps an angle into [-pi, pi) as Gymnasium's
 * angle_normalize does (Python's % is a non-negative modulo). */
double ro__pendulum_angle_normalize(double x);

#endif
