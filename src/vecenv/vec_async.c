/* vec_async.c: send() and recv() of the vector engine (vec_async.h). */
#include "vecenv/vec_async.h"

#include "runtime/error.h"
#include "vecenv/vec_step.h"

static void ready_push(ro_vec_t *v, uint32_t id)
{
    v->ready[(v->ready_head + v->ready_len) % v->n] = id;
    v->ready_len++;
    v->where[id] = RO_VEC_READY;
}

/* harvest waits for the posted job (the owner takes its untaken chunks)
 * and makes its envs READY. */
static void harvest(ro_vec_t *v)
{
    if (!v->njob)
        return;
    ro__vec_pool_wait(&v->pool);
    for (uint32_t i = 0; i < v->njob; i++)
        ready_push(v, v->job_ids[i]);
    for (uint32_t i = 0; i < v->njob; i++)
        v->failures += v->failed[v->job_ids[i]];
    v->njob = 0;
}

/* launch hands every pending env to one job. */
static void launch(ro_vec_t *v)
{
    if (!v->npending || v->njob)
        return;
    for (uint32_t i = 0; i < v->npending; i++)
        v->job_ids[i] = v->pending[i];
    v->njob = v->npending;
    v->npending = 0;
    if (v->group) /* a Python env: one item per worker process, one command each */
        ro__vec_pool_post(&v->pool, ro__vec_step_ids_groups_part, v,
                          (v->n + v->group - 1) / v->group);
    else
        ro__vec_pool_post(&v->pool, ro__vec_step_ids_part, v, v->njob);
}

void ro__vec_async_start(ro_vec_t *v)
{
    v->ready_head = v->ready_len = 0;
    for (uint32_t j = 0; j < v->n; j++)
        ready_push(v, j);
}

void ro__vec_async_drop(ro_vec_t *v)
{
    if (v->njob)
        ro__vec_pool_wait(&v->pool);
    v->njob = v->npending = 0;
}

int ro__vec_send(ro_vec_t *v, const uint32_t *ids, uint32_t k, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < k; i++) {
        if (ids[i] >= v->n)
            return ro__errorf(err, errlen, RO_EINVAL, "send: env %u: there are %u envs", ids[i],
                              v->n);
        if (v->where[ids[i]] != RO_VEC_HANDED)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "send: env %u %s: send() takes the envs recv() returned, once",
                              ids[i],
                              v->where[ids[i]] == RO_VEC_STEPPING ? "is stepping already"
                                                                  : "was not received yet");
    }
    for (uint32_t i = 0; i < k; i++) {
        v->where[ids[i]] = RO_VEC_STEPPING;
        v->pending[v->npending++] = ids[i];
    }
    if (v->njob && !ro__vec_pool_busy(&v->pool))
        harvest(v);
    launch(v);
    return 0;
}

int ro__vec_recv(ro_vec_t *v, uint32_t *ids, char *err, size_t errlen)
{
    while (v->ready_len < v->batch) {
        if (!v->njob && !v->npending)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "recv: %u envs are ready and none is stepping, %u are needed: "
                              "send() the envs recv() returned",
                              v->ready_len, v->batch);
        harvest(v);
        launch(v); /* what was sent meanwhile steps while we hand results out */
    }
    for (uint32_t i = 0; i < v->batch; i++) {
        ids[i] = v->ready[v->ready_head];
        v->ready_head = (v->ready_head + 1) % v->n;
        v->where[ids[i]] = RO_VEC_HANDED;
    }
    v->ready_len -= v->batch;
    return 0;
}
