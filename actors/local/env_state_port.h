/*
 * An env shard's state port (actors/exchange/state_port.h): its envs saved
 * and restored through envs/env_state.c's checked blobs, by whoever holds
 * the shard's step batch.
 */
#ifndef RO_ENV_STATE_PORT_H
#define RO_ENV_STATE_PORT_H

#include "actors/local/env_shard.h"

/* ro__env_state_port_wire fills s's port and offers it with its batch
 * (xchg.state); the blobs' params are those of s's kind, args and
 * max_steps. Main thread, when the shard is wired. */
void ro__env_state_port_wire(ro_env_shard_t *s);

#endif
