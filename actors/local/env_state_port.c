/*
 * An env shard's state port (env_state_port.h). Called by the holder of the
 * shard's step batch, on its thread, while it holds it (state_port.h): the
 * shard's per-env bookkeeping is then the holder's to touch too.
 */
#include "actors/local/env_state_port.h"

#include <stdio.h>
#include <string.h>

#include "actors/recorder/recorder_actor.h"
#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "envs/env_state.h"
#include "runtime/error.h"
#include "spaces/layout.h"

static ro_env_shard_t *shard_of(ro_state_port_t *p)
{
    return ro__container_of(p, ro_env_shard_t, state_port);
}

static int port_bytes(ro_state_port_t *p, uint32_t j, size_t *out, char *err, size_t errlen)
{
    ro_env_shard_t *s = shard_of(p);
    return ro__env_state_bytes(&s->kind, s->envs[j], out, err, errlen);
}

static int port_save(ro_state_port_t *p, uint32_t j, void *buf, size_t cap, size_t *len, char *err,
                     size_t errlen)
{
    ro_env_shard_t *s = shard_of(p);
    return ro__env_state_save(&s->kind, s->envs[j], s->state_params, s->ep_len[j], buf, cap, len,
                              err, errlen);
}

static int port_check(ro_state_port_t *p, uint32_t j, const void *blob, size_t len, char *err,
                      size_t errlen)
{
    ro_env_shard_t *s = shard_of(p);
    if (s->rec)
        return ro__errorf(err, errlen, RO_EPERM,
                          "env %u: this node records (--record), and a recording cannot show a "
                          "restored state (rollout-replay --verify would not verify it)",
                          s->xchg.first + j);
    ro_env_state_info_t info;
    return ro__env_state_check(&s->kind, s->envs[j], s->state_params, blob, len, &info, err,
                               errlen);
}

/* restart resets env j into its rows of the batch after its env refused a
 * state: the episode is cut, as after a failed step. */
static void restart(ro_env_shard_t *s, uint32_t j)
{
    ro_step_batch_t *b = &s->xchg;
    const uint32_t A = b->agents ? b->agents : 1;
    const size_t r0 = (size_t)j * A;
    void *t[RO_ENV_MAX_TENSORS];
    const uint32_t nt = b->layout ? b->layout->ntensors : 1;
    for (uint32_t k = 0; k < nt; k++)
        t[k] = b->tensor[k] +
               r0 * (b->layout ? b->layout->t[k].row_bytes : (size_t)b->obs_dim * sizeof(float));
    uint8_t *mask = b->mask ? b->mask + r0 * b->layout->mask_width : NULL;
    ro__env_reset(&s->kind, s->envs[j], t, mask);
    s->env_failures++;
    s->ep_num[j]++;
    s->ep_len[j] = 0;
    s->ep_return[j] = 0.0;
    memset(b->episode_start + r0, 1, A);
}

static int port_load(ro_state_port_t *p, uint32_t j, const void *blob, size_t len, char *err,
                     size_t errlen)
{
    ro_env_shard_t *s = shard_of(p);
    int rc = port_check(p, j, blob, len, err, errlen);
    if (rc)
        return rc; /* nothing was loaded */
    uint64_t elapsed = 0;
    rc =
        ro__env_state_load(&s->kind, s->envs[j], s->state_params, blob, len, &elapsed, err, errlen);
    if (rc) {
        restart(s, j);
        size_t at = strlen(err);
        if (at < errlen)
            snprintf(err + at, errlen - at, "; env %u was reset (an env failure)",
                     s->xchg.first + j);
        return rc;
    }
    /* The episode in progress is left unfinished, as a reseed leaves it;
     * the restored one counts the blob's steps toward the episode limit.
     * Its action mask is unknown until its next observation (a state holds
     * none): every value is allowed for this step, as make_vec allows. */
    ro_step_batch_t *b = &s->xchg;
    if (b->mask)
        memset(b->mask + (size_t)j * b->agents * b->layout->mask_width, 1,
               (size_t)b->agents * b->layout->mask_width);
    s->ep_num[j]++;
    s->ep_len[j] = elapsed > UINT32_MAX ? UINT32_MAX : (uint32_t)elapsed;
    s->ep_return[j] = 0.0;
    return 0;
}

void ro__env_state_port_wire(ro_env_shard_t *s)
{
    s->state_port.bytes = port_bytes;
    s->state_port.save = port_save;
    s->state_port.check = port_check;
    s->state_port.load = port_load;
    s->state_params =
        ro__env_params_hash(ro__env_kind_name(&s->kind), s->args, s->nargs, s->rules.max_steps);
    s->xchg.state = &s->state_port;
}
