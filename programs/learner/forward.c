#include "learner/forward.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

/* Grow a lane's scratch to hold rows rows. Lane's thread. */
static int lane_ensure_ws(ro_lane_t *ln, uint32_t rows)
{
    if (rows <= ln->ws_rows)
        return 0;
    ro__policy_ws_free(ln->ws);
    ln->ws = NULL;
    ln->ws_rows = 0;
    if (ro__policy_ws_new(&ln->ws, ln->fw->policy, rows) != 0)
        return RO_ENOMEM;
    ln->ws_rows = rows;
    return 0;
}

/* A job's forward pass, on the lane's scratch. */
static void run_job(ro_lane_t *ln, ro_job_t *j)
{
    const ro_forward_t *fw = ln->fw;
    if (lane_ensure_ws(ln, j->rows) == 0) {
        float *in = ro__policy_ws_input(ln->ws);
        uint32_t r = 0;
        for (ro_batch_item_t *it = j->frames; it; it = it->next) {
            const ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
            memcpy(in + (size_t)r * fw->obs_dim, p->obs,
                   (size_t)it->rows * fw->obs_dim * sizeof(float));
            r += it->rows;
        }
        /* The rows' states were chosen on arrival (state_table.h): the
         * episode starts are applied already. */
        const ro_policy_carry_t carry = {.state = j->state};
        const ro_policy_carry_t *c = j->state ? &carry : NULL;
        /* Any layout (an ABI 1 env's too): a policy that is not composite
         * acts as ro__policy_act does. */
        ro__policy_act_masked(fw->policy, ln->ws, j->rows, j->rowrng, j->mask, j->act_i, j->act_f,
                              NULL, c);
    } else {
        j->failed = true; /* out of memory: the loop answers nothing, the node resends */
    }
}

/* A lane runs a job's forward pass and sends the job back. */
static void lane_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_lane_t *ln = ro__container_of(self, ro_lane_t, actor);
    ro_job_t *j = ro__container_of(msg, ro_job_t, msg);
    run_job(ln, j);
    ro__actor_send(&ln->fw->done, &j->msg);
}

static void done_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_forward_t *fw = ro__container_of(self, ro_forward_t, done);
    fw->jobs_out--;
    fw->on_done(fw->ctx, ro__container_of(msg, ro_job_t, msg));
}

int ro__forward_start(ro_forward_t *fw, uv_loop_t *loop, uint32_t workers, bool overcommit,
                      ro_job_done_fn on_done, void *ctx, char *err, size_t errlen)
{
    fw->on_done = on_done;
    fw->ctx = ctx;
    int rc = ro__topology_read(&fw->topo, err, errlen);
    if (rc)
        return rc;
    int w = (int)workers;
    if (w == 0) { /* one lane, run by the loop thread itself; no done actor */
        if (!(fw->lanes = calloc(1, sizeof *fw->lanes)))
            return RO_ENOMEM;
        fw->lanes[0].fw = fw;
        fw->nlanes = 1;
        fw->inline_lane = true;
        return 0;
    }
    fw->plan = calloc((size_t)w, sizeof *fw->plan);
    fw->lanes = calloc((size_t)w, sizeof *fw->lanes);
    if (!fw->plan || !fw->lanes)
        return RO_ENOMEM;
    rc = ro__topology_plan(&fw->topo, w, overcommit, fw->plan, fw->group_nodes, &fw->ngroups);
    if (rc == RO_ERANGE)
        return ro__errorf(err, errlen, rc,
                          "--workers %d: only %d CPUs are allowed for this process (use "
                          "--overcommit to insist)",
                          w, fw->topo.ncpus);
    if (rc || (rc = ro__sched_new(&fw->sched, fw->ngroups, fw->group_nodes, fw->plan, w)))
        return rc;
    fw->nlanes = (uint32_t)w;
    for (int i = 0; i < w; i++) {
        fw->lanes[i].fw = fw;
        ro__actor_init_worker(&fw->lanes[i].actor, "learner-lane", lane_behaviour,
                              ro__sched_queue(fw->sched, i), 4);
    }
    if ((rc = ro__actor_init_loop(&fw->done, "learner-done", done_behaviour, loop,
                                  &fw->done_home)) != 0)
        return ro__errorf(err, errlen, RO_EIO, "cannot set up the event loop: %s", uv_strerror(rc));
    return ro__sched_start(fw->sched);
}

void ro__forward_submit(ro_forward_t *fw, ro_job_t *job)
{
    if (fw->inline_lane) {
        run_job(&fw->lanes[0], job);
        fw->on_done(fw->ctx, job);
        return;
    }
    fw->jobs_out++;
    ro_lane_t *ln = &fw->lanes[fw->next_lane++ % fw->nlanes];
    ro__actor_send(&ln->actor, &job->msg);
}

void ro__forward_close(ro_forward_t *fw)
{
    if (!fw->lanes) /* never started: no node welcomed us */
        return;
    /* The lanes are idle (no job out), but one may still be inside the send
     * of its last answer, ringing done_home: join them before closing it. */
    if (fw->sched)
        ro__sched_stop(fw->sched);
    if (!fw->inline_lane)
        ro__actor_close_loop(&fw->done_home);
}

void ro__forward_stop(ro_forward_t *fw)
{
    if (fw->sched) {
        ro__sched_stop(fw->sched);
        ro__sched_free(fw->sched);
    }
    for (uint32_t i = 0; fw->lanes && i < fw->nlanes; i++)
        ro__policy_ws_free(fw->lanes[i].ws);
    free(fw->lanes);
    free(fw->plan);
    ro__topology_free(&fw->topo);
    memset(fw, 0, sizeof *fw);
}
