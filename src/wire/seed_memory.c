#include "wire/seed_memory.h"

#include <string.h>

#include "runtime/error.h"

#define PAGE 4096u
#define LINE 64u

static uint64_t round_up(uint64_t x, uint64_t to)
{
    return (x + to - 1) / to * to;
}

void ro__seed_mem_layout(ro_seed_mem_layout_t *l, uint32_t num_envs, uint32_t obs_dim,
                         uint32_t act_width)
{
    memset(l, 0, sizeof *l);
    l->num_envs = num_envs;
    l->obs_dim = obs_dim;
    l->act_width = act_width;
    const uint64_t n = num_envs, rows = n * obs_dim * sizeof(float);
    uint64_t at = 0;
    l->obs_off = at;
    at = round_up(at + rows, LINE);
    l->final_off = at;
    at = round_up(at + rows, LINE);
    l->step_off = at;
    at = round_up(at + n * sizeof(uint64_t), LINE);
    l->reward_off = at;
    at = round_up(at + n * sizeof(float), LINE);
    l->flags_off = at;
    at = round_up(at + n, LINE);
    l->obs_bytes = round_up(at, PAGE);
    l->act_off = 0; /* int32 and float32 are both 4 bytes */
    l->act_bytes = round_up(n * act_width * 4, PAGE);
}

void ro__seed_mem_to_wire(const ro_seed_mem_layout_t *l, uint32_t obs_index, uint32_t act_index,
                          Rollout__V1__SeedMemory *m)
{
    m->obs_fd = obs_index;
    m->obs_bytes = l->obs_bytes;
    m->act_fd = act_index;
    m->act_bytes = l->act_bytes;
    m->obs_offset = l->obs_off;
    m->final_obs_offset = l->final_off;
    m->step_offset = l->step_off;
    m->reward_offset = l->reward_off;
    m->flags_offset = l->flags_off;
    m->act_offset = l->act_off;
}

/* A column of `bytes` at off, aligned to `align`, inside a memory of size. */
static int column(uint64_t off, uint64_t bytes, uint64_t align, uint64_t size, const char *name,
                  char *err, size_t errlen)
{
    if (off % align != 0 || off > size || bytes > size - off)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "shared memory: the %s column (%llu bytes at %llu) is not inside its "
                          "%llu bytes or not aligned",
                          name, (unsigned long long)bytes, (unsigned long long)off,
                          (unsigned long long)size);
    return 0;
}

int ro__seed_mem_check(const Rollout__V1__SeedMemory *m, uint32_t num_envs, uint32_t obs_dim,
                       uint32_t act_width, ro_seed_mem_layout_t *out, char *err, size_t errlen)
{
    /* What this build would lay out bounds what a peer may ask us to map. */
    ro_seed_mem_layout_t want;
    ro__seed_mem_layout(&want, num_envs, obs_dim, act_width);
    if (m->obs_bytes == 0 || m->obs_bytes > want.obs_bytes + PAGE || m->act_bytes == 0 ||
        m->act_bytes > want.act_bytes + PAGE)
        return ro__errorf(
            err, errlen, RO_EPROTO, "shared memory of %llu and %llu bytes offered for %u envs",
            (unsigned long long)m->obs_bytes, (unsigned long long)m->act_bytes, num_envs);
    const uint64_t n = num_envs, rows = n * obs_dim * sizeof(float);
    int rc;
    if ((rc = column(m->obs_offset, rows, 4, m->obs_bytes, "obs", err, errlen)) ||
        (rc = column(m->final_obs_offset, rows, 4, m->obs_bytes, "final obs", err, errlen)) ||
        (rc = column(m->step_offset, n * 8, 8, m->obs_bytes, "step", err, errlen)) ||
        (rc = column(m->reward_offset, n * 4, 4, m->obs_bytes, "reward", err, errlen)) ||
        (rc = column(m->flags_offset, n, 1, m->obs_bytes, "flags", err, errlen)) ||
        (rc = column(m->act_offset, n * act_width * 4, 4, m->act_bytes, "action", err, errlen)))
        return rc;
    *out = want;
    out->obs_off = m->obs_offset;
    out->final_off = m->final_obs_offset;
    out->step_off = m->step_offset;
    out->reward_off = m->reward_offset;
    out->flags_off = m->flags_offset;
    out->obs_bytes = m->obs_bytes;
    out->act_off = m->act_offset;
    out->act_bytes = m->act_bytes;
    return 0;
}

int ro__seed_mem_rows(const uint32_t *ranges, size_t nvalues, uint32_t num_envs, uint32_t *rows,
                      char *err, size_t errlen)
{
    uint64_t total = 0;
    if (nvalues == 0 || nvalues % 2 != 0)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "an in-memory frame's ranges have %zu values, not (first, count) pairs",
                          nvalues);
    for (size_t i = 0; i < nvalues; i += 2) {
        uint32_t first = ranges[i], count = ranges[i + 1];
        if (count == 0 || first >= num_envs || count > num_envs - first)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "an in-memory frame's range of %u envs from %u is empty or not "
                              "inside [0, %u)",
                              count, first, num_envs);
        total += count;
    }
    if (total > num_envs)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "an in-memory frame of %llu envs; the node has %u",
                          (unsigned long long)total, num_envs);
    *rows = (uint32_t)total;
    return 0;
}
