/*
 * The envs of a step batch, saved and restored by the batch's holder (the
 * remote hub, for a learner's GetState and SetState: docs/protocol.md "Env
 * state"). The env actor offers its port with its batch (step_batch.h's
 * state); the holder may call it only while it holds the batch, between
 * the env actor's offer and the reply: the env actor touches none of the
 * shard's envs then, and the batch's messages order the memory as they do
 * for the batch's own fields. The calls run the env's own state code on
 * the holder's thread (a copy of state_size() bytes each).
 *
 * j counts the shard's envs (0 .. n / agents - 1: env first + j). Each
 * returns 0, or a negative code with one line in err naming the env.
 */
#ifndef RO_STATE_PORT_H
#define RO_STATE_PORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct ro_state_port ro_state_port_t;

struct ro_state_port {
    /* bytes sets *out to env j's state blob's bytes (envs/env_state.h);
     * RO_ENOTSUP naming the env when it keeps no state. */
    int (*bytes)(ro_state_port_t *p, uint32_t j, size_t *out, char *err, size_t errlen);
    /* save writes env j's state blob (cap bytes at buf, at least bytes()). */
    int (*save)(ro_state_port_t *p, uint32_t j, void *buf, size_t cap, size_t *len, char *err,
                size_t errlen);
    /* check does every check load does, loading nothing: a blob of this
     * env's name, args and size (RO_EBADMSG), an env with state support
     * (RO_ENOTSUP), a shard that no recorder watches (RO_EPERM: a
     * recording cannot show a restore). */
    int (*check)(ro_state_port_t *p, uint32_t j, const void *blob, size_t len, char *err,
                 size_t errlen);
    /* load checks blob, then restores env j from it: its next step starts
     * from that state, in a new episode of the shard's count whose elapsed
     * steps are the blob's. When the env's load_state() refuses the bytes,
     * the env is reset instead (an env failure, as a failed step) and the
     * code says so. */
    int (*load)(ro_state_port_t *p, uint32_t j, const void *blob, size_t len, char *err,
                size_t errlen);
};

#endif
