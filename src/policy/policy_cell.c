/*
 * The recurrent cell of a policy (a GRU or an LSTM after the hidden
 * layers, before the head): a block's states gathered from the rows'
 * carries, the gates' two matrix products by the dense kernel, the gates
 * themselves by the cell kernel (kernel_cell.h), and the new states written
 * back. The arithmetic is the kernels', so a row's new state has the same
 * bits on every instruction set and in every batch.
 *
 * The cell always runs the exact kernels, --gemm openblas included: its
 * state feeds the next step, and a rounding that changed with the batch
 * would compound over an episode.
 */
#include <string.h>

#include "policy/policy.h"
#include "policy/policy_internal.h"

/* lanes rounds n up to the widest vector any kernel path reads. */
static uint32_t lanes(uint32_t n)
{
    return (n + RO_POLICY_MAX_LANES - 1) / RO_POLICY_MAX_LANES * RO_POLICY_MAX_LANES;
}

uint32_t ro__policy_state_floats(const ro_policy_t *p)
{
    return p->cell == RO_CELL_LSTM ? 2 * p->hid : p->cell == RO_CELL_GRU ? p->hid : 0;
}

ro_cell_t ro__policy_cell(const ro_policy_t *p, uint32_t *hidden)
{
    if (hidden)
        *hidden = p->cell ? p->hid : 0;
    return p->cell;
}

/* gather_states transposes the block's states into ws->st [sf][RO_BLOCK]:
 * zeros for a row that starts an episode, for the lanes past n, and for
 * every row without a carry. */
static void gather_states(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n,
                          const ro_policy_carry_t *c, uint32_t i0)
{
    const uint32_t sf = ro__policy_state_floats(p), nl = lanes(n);
    for (uint32_t k = 0; k < sf; k++)
        memset(ws->st + (size_t)k * RO_BLOCK, 0, nl * sizeof(float));
    if (!c)
        return;
    for (uint32_t s = 0; s < n; s++) {
        if (c->first && c->first[i0 + s])
            continue;
        const float *row = c->state[i0 + s];
        for (uint32_t k = 0; k < sf; k++)
            ws->st[(size_t)k * RO_BLOCK + s] = row[k];
    }
}

void ro__policy_cell_block(const ro_policy_t *p, ro_policy_ws_t *ws, const float *x, float *y,
                           uint32_t n, const ro_policy_carry_t *carry, uint32_t i0)
{
    const uint32_t hid = p->hid;
    gather_states(p, ws, n, carry, i0);
    p->kern->dense(&p->dense[p->cell_at], x, ws->gi, n, 0);
    p->kern->dense(&p->cell_hh, ws->st, ws->gh, n, 0);
    if (p->cell == RO_CELL_GRU)
        p->kern->gru(ws->gi, ws->gh, ws->st, y, hid, n);
    else
        p->kern->lstm(ws->gi, ws->gh, ws->st + (size_t)hid * RO_BLOCK, y, ws->cout, hid, n);
    if (!carry)
        return;
    for (uint32_t s = 0; s < n; s++) {
        float *row = carry->state[i0 + s];
        for (uint32_t k = 0; k < hid; k++)
            row[k] = y[(size_t)k * RO_BLOCK + s];
        for (uint32_t k = 0; p->cell == RO_CELL_LSTM && k < hid; k++)
            row[hid + k] = ws->cout[(size_t)k * RO_BLOCK + s];
    }
}
