/*
 * libFuzzer entry point for the wire's frame reader (-Dfuzz=true, clang):
 * what a learner or a node reads from a peer. The input is fed in chunks of
 * varying size (as TCP delivers it) to a reader with a 64 KiB frame limit;
 * an error must stop the stream cleanly. Every frame decoded then goes
 * through the validation its receiver applies (src/wire_check.c: hello and
 * actions on the node, welcome and observations on the learner), against
 * a discrete and a box env, and against an env ABI 2 layout (SEED frames
 * of typed tensors, masks and composite actions, wire/typed_checks.h; a
 * welcome's layout read back); whatever passes is read in full, so a check
 * that lets an out-of-bounds index or length through shows up as an ASan
 * report. The whole input is also read as one frame's body by a stream
 * learner (wire/segment_view.h): parsed in place, its tensors resolved
 * against a small "shared memory" when it says in_memory, checked, and
 * every byte of every tensor then read. GetState and SetState frames go
 * through the node's checks, and a SetState's blobs through the env state
 * checks into a cartpole instance. (PolicyParams have their own target,
 * fuzz_policy_params.)
 *
 *     build-fuzz/tests/fuzz/fuzz_frame -max_total_time=60 tests/fuzz/corpus/frame/
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_state.h"
#include "envs/registry.h"
#include "wire/frame.h"
#include "wire/checks.h"
#include "spaces/layout.h"
#include "wire/typed_checks.h"
#include "wire/seed_memory.h"
#include "wire/segment_view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Sums what a passing message holds: every index and value is read. */
static volatile float sink;

static const float box_low[2] = {-2.0f, -1.0f}, box_high[2] = {2.0f, 1.0f};
static const ro_space_t discrete_act = {.kind = RO_SPACE_DISCRETE, .n = 2};
static const ro_space_t box_act = {
    .kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = box_low, .high = box_high};

static void check_actions(const Rollout__V1__Actions *a)
{
    char err[256];
    const ro_space_t *spaces[2] = {&discrete_act, &box_act};
    for (int k = 0; k < 2; k++) {
        const ro_space_t *sp = spaces[k];
        size_t dim = ro_space_size(sp);
        size_t n = sp->kind == RO_SPACE_DISCRETE ? a->n_discrete : a->n_box;
        /* The batch the frame claims to answer, and a fixed one. */
        size_t rows[2] = {n / dim, 4};
        for (int r = 0; r < 2; r++) {
            if (ro__check_actions(a, rows[r], sp, err, sizeof err) != 0)
                continue;
            for (size_t i = 0; i < rows[r] * dim; i++)
                sink += sp->kind == RO_SPACE_DISCRETE ? (float)a->discrete[i] : a->box[i];
        }
    }
}

static void check_observations(const Rollout__V1__Observations *o)
{
    char err[256];
    const uint32_t dims[2] = {4, 1}, envs[2] = {64, 1u << 20};
    for (int k = 0; k < 2; k++) {
        if (ro__check_observations(o, dims[k], envs[k], err, sizeof err) != 0)
            continue;
        for (size_t i = 0; o->in_memory && i + 1 < o->n_ranges; i += 2)
            if (o->ranges[i] >= envs[k] || o->ranges[i + 1] > envs[k] - o->ranges[i])
                __builtin_trap(); /* a range that passed the check, yet outside the envs */
        for (size_t i = 0; i < o->n_env; i++) {
            if (o->env[i] >= envs[k])
                __builtin_trap(); /* passed the check, yet outside the node's envs */
            sink += o->reward[i] + (float)o->step[i] + (float)o->terminated[i] +
                    (float)o->truncated[i] + (float)o->episode_start[i];
            for (uint32_t d = 0; d < dims[k]; d++)
                sink += o->obs[i * dims[k] + d];
        }
        for (size_t j = 0; j < o->n_final_index; j++) {
            if (o->final_index[j] >= o->n_env)
                __builtin_trap();
            for (uint32_t d = 0; d < dims[k]; d++)
                sink += o->final_obs[j * dims[k] + d];
        }
    }
}

/* An env ABI 2 layout as SEED frames follow it: 2 agents, a uint8 [3, 3]
 * tensor "view" and an int32 [2] "pos", one Discrete(5) entry with its
 * mask, a Box of 2 in [-1, 1]. Built once. */
static const ro_space_layout_t *typed_layout(void)
{
    static ro_space_layout_t lay;
    static bool built;
    if (built)
        return &lay;
    static const float lo[2] = {-1, -1}, hi[2] = {1, 1};
    ro_env_spaces_t sp = {.size = sizeof sp, .num_agents = 2, .num_obs = 2, .num_parts = 2};
    sp.obs[0] =
        (ro_tensor_space_t){.name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {3, 3}};
    sp.obs[1] =
        (ro_tensor_space_t){.name = "pos", .dtype = RO_DTYPE_INT32, .ndim = 1, .shape = {2}};
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 5};
    sp.act[1] =
        (ro_action_part_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = lo, .high = hi};
    sp.action_mask = 1;
    char err[256];
    if (ro__layout_from_spaces(&lay, &sp, "fuzz", err, sizeof err) != 0)
        abort();
    built = true;
    return &lay;
}

/* An ABI 2 frame that passed: every row, tensor byte and mask byte read. */
static void read_typed(const Rollout__V1__Observations *o, const ro_space_layout_t *lay,
                       uint32_t rows)
{
    if (o->in_memory) { /* ranges of rows only */
        for (size_t i = 0; i + 1 < o->n_ranges; i += 2)
            if (o->ranges[i] >= rows || o->ranges[i + 1] > rows - o->ranges[i])
                __builtin_trap();
        return;
    }
    for (size_t i = 0; i < o->n_env; i++) {
        if (o->env[i] >= rows)
            __builtin_trap();
        sink += o->reward[i] + (float)o->step[i] + (float)o->terminated[i];
    }
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        if (o->tensors[k]->data.len != o->n_env * lay->t[k].row_bytes ||
            o->final_tensors[k]->data.len != o->n_final_index * lay->t[k].row_bytes)
            __builtin_trap();
        for (size_t b = 0; b < o->tensors[k]->data.len; b++)
            sink += o->tensors[k]->data.data[b];
        for (size_t b = 0; b < o->final_tensors[k]->data.len; b++)
            sink += o->final_tensors[k]->data.data[b];
    }
    for (size_t b = 0; b < o->n_env * lay->mask_width; b++)
        sink += o->mask.data[b];
    char err[256];
    /* Actions drawn from the first discrete value each row's mask allows. */
    int32_t disc[64];
    float box[128] = {0};
    for (size_t i = 0; i < o->n_env && i < 64; i++) {
        disc[i] = 0;
        while (disc[i] < 4 && !o->mask.data[i * lay->mask_width + (size_t)disc[i]])
            disc[i]++;
    }
    size_t n = o->n_env < 64 ? o->n_env : 64;
    (void)ro__check_action_rows_typed(disc, box, o->mask.data, n, lay, o->seq, 0, err, sizeof err);
}

static void check_observations_typed(const Rollout__V1__Observations *o)
{
    char err[256];
    const ro_space_layout_t *lay = typed_layout();
    const uint32_t rows[2] = {8, 1u << 20};
    for (int k = 0; k < 2; k++)
        if (ro__check_observations_typed(o, lay, rows[k], err, sizeof err) == 0)
            read_typed(o, lay, rows[k]);
}

static void check_actions_typed(const Rollout__V1__Actions *a)
{
    char err[256];
    const ro_space_layout_t *lay = typed_layout();
    size_t rows = a->n_discrete;
    if (ro__check_actions_typed(a, rows, lay, err, sizeof err) == 0)
        (void)ro__check_action_rows_typed(a->discrete, a->box, NULL, rows, lay, a->seq, 0, err,
                                          sizeof err);
}

static void check_welcome_layout(const Rollout__V1__Welcome *w)
{
    ro_space_layout_t lay;
    char err[256];
    if (!w->layout || ro__layout_from_wire(&lay, w->layout, err, sizeof err) != 0)
        return;
    for (uint32_t e = 0; e < lay.ndisc; e++)
        sink += (float)lay.disc_n[e] + (float)lay.disc_mask[e];
    for (uint32_t j = 0; j < lay.nbox; j++)
        sink += lay.box_high[j] - lay.box_low[j];
    ro_seed_mem_layout_t ml;
    const uint32_t rows = w->spec && w->spec->num_envs <= 4096 ? w->spec->num_envs * lay.agents : 0;
    if (w->seed_memory && rows &&
        ro__seed_mem_check_typed(w->seed_memory, rows, &lay, &ml, err, sizeof err) == 0) {
        for (uint32_t k = 0; k < lay.ntensors; k++)
            if (ml.tensor_off[k] + rows * ml.row_bytes[k] > ml.obs_bytes ||
                ml.final_tensor_off[k] + rows * ml.row_bytes[k] > ml.obs_bytes)
                __builtin_trap(); /* accepted a column outside its memory */
        if (ml.mask_off + (uint64_t)rows * lay.mask_width > ml.obs_bytes ||
            ml.act_off + (uint64_t)rows * lay.ndisc * 4 > ml.act_bytes ||
            ml.act_box_off + (uint64_t)rows * lay.nbox * 4 > ml.act_bytes)
            __builtin_trap();
    }
    ro__layout_free(&lay);
}

static void check_welcome(const Rollout__V1__Welcome *w)
{
    char err[256];
    ro_space_t obs, act;
    check_welcome_layout(w);
    if (ro__check_welcome(w, 1u << 20, &obs, &act, err, sizeof err) != 0)
        return;
    ro_seed_mem_layout_t lay;
    const uint32_t od = (uint32_t)ro_space_size(&obs);
    const uint32_t aw = act.kind == RO_SPACE_DISCRETE ? 1 : (uint32_t)ro_space_size(&act);
    if (w->seed_memory &&
        ro__seed_mem_check(w->seed_memory, w->spec->num_envs, od, aw, &lay, err, sizeof err) == 0) {
        const uint64_t n = w->spec->num_envs;
        if (lay.obs_off + n * od * 4 > lay.obs_bytes ||
            lay.final_off + n * od * 4 > lay.obs_bytes || lay.step_off + n * 8 > lay.obs_bytes ||
            lay.reward_off + n * 4 > lay.obs_bytes || lay.flags_off + n > lay.obs_bytes ||
            lay.act_off + n * aw * 4 > lay.act_bytes)
            __builtin_trap(); /* accepted a column outside its memory */
    }
    const ro_space_t *sp[2] = {&obs, &act};
    for (int k = 0; k < 2; k++)
        if (sp[k]->kind == RO_SPACE_BOX)
            for (size_t i = 0; i < ro_space_size(sp[k]); i++)
                sink += sp[k]->high[i] - sp[k]->low[i];
}

static void check_hello(const Rollout__V1__Hello *h)
{
    char err[256];
    bool trainer;
    const ro_hello_rules_t rules[2] = {{.learners = true, .token = "s3cret"}, {.trainers = true}};
    for (int k = 0; k < 2; k++)
        if (ro__check_hello(h, &rules[k], &trainer, err, sizeof err) == 0 && trainer != (k == 1))
            __builtin_trap(); /* accepted a role this node does not take */
}

/* An Upgrade a learner accepts names a path that fits a sockaddr_un and a
 * 16-byte nonce (rollout-learner copies both into fixed arrays). */
static void check_upgrade(const Rollout__V1__Upgrade *u)
{
    char err[256];
    if (ro__check_upgrade(u, err, sizeof err) == 0 &&
        (strlen(u->path) > 107 || u->path[0] != '/' || u->nonce.len != 16))
        __builtin_trap();
}

/* A GetState or SetState a node accepts names distinct envs below its
 * num_envs, and a SetState one blob per env; each blob the env state
 * checks pass is loaded into a cartpole instance, as the hub's state port
 * does (hub_env_state.c, envs/env_state.c). */
static void check_state_request(const uint32_t *env, size_t nenv, const ProtobufCBinaryData *st,
                                size_t nstate, bool set)
{
    static void *cart;
    const ro_env_kind_t kind = {.vt = &ro__env_cartpole, .state = ro__cartpole_state};
    enum { NUM_ENVS = 64 };
    uint8_t seen[(NUM_ENVS + 7) / 8], mine[NUM_ENVS] = {0};
    char err[256];
    if (ro__check_state_request(env, nenv, nstate, set, NUM_ENVS, seen, err, sizeof err) != 0)
        return;
    for (size_t i = 0; i < nenv; i++)
        if (env[i] >= NUM_ENVS || mine[env[i]]++)
            __builtin_trap(); /* passed the check, yet outside the envs or named twice */
    if (!cart && ro__env_cartpole.create(&cart, NULL, 0, 1, err, sizeof err) != 0)
        abort();
    const uint64_t params = ro__env_params_hash("cartpole", NULL, 0, 500);
    for (size_t i = 0; set && i < nstate; i++) {
        ro_env_state_info_t info;
        if (ro__env_state_check(&kind, cart, params, st[i].data, st[i].len, &info, err,
                                sizeof err) == 0)
            (void)ro__env_state_load(&kind, cart, params, st[i].data, st[i].len, NULL, err,
                                     sizeof err);
    }
}

/* A oneof member is present whenever its case is set; the receivers
 * check the pointer anyway, and so does this. */
static void validate(const ro_frame_t *f)
{
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_HELLO:
        if (f->hello)
            check_hello(f->hello);
        break;
    case ROLLOUT__V1__FRAME__BODY_ACTIONS:
        if (f->actions) {
            check_actions(f->actions);
            check_actions_typed(f->actions);
        }
        break;
    case ROLLOUT__V1__FRAME__BODY_OBSERVATIONS:
        if (f->observations) {
            check_observations(f->observations);
            check_observations_typed(f->observations);
        }
        break;
    case ROLLOUT__V1__FRAME__BODY_WELCOME:
        if (f->welcome)
            check_welcome(f->welcome);
        break;
    case ROLLOUT__V1__FRAME__BODY_UPGRADE:
        if (f->upgrade)
            check_upgrade(f->upgrade);
        break;
    case ROLLOUT__V1__FRAME__BODY_GET_STATE:
        if (f->get_state)
            check_state_request(f->get_state->env, f->get_state->n_env, NULL, 0, false);
        break;
    case ROLLOUT__V1__FRAME__BODY_SET_STATE:
        if (f->set_state)
            check_state_request(f->set_state->env, f->set_state->n_env, f->set_state->state,
                                f->set_state->n_state, true);
        break;
    default: /* error, goodbye, policy_accepted: strings and numbers only */
        break;
    }
}

/* A stream learner's read of a segment frame, in place. */
static void check_segment(const uint8_t *data, size_t size)
{
    static uint8_t memory[4096]; /* the node's segment memory, as mapped */
    /* ABI 1 (in memory, in frames), and an env ABI 2 layout: 2 agents, a
     * uint8 [3, 3] tensor "view", one Discrete(5) entry with its mask. */
    const ro_segment_rules_t rules[3] = {
        {.unroll = 64, .num_envs = 1024, .obs_dim = 4, .act_dim = 1, .discrete = true},
        {.unroll = 8, .num_envs = 4, .obs_dim = 1, .act_dim = 2, .discrete = false},
        {.unroll = 8,
         .num_envs = 4,
         .abi2 = true,
         .agents = 2,
         .nobs = 1,
         .obs = {{.name = "view", .dtype = 3, .ndim = 2, .shape = {3, 3}}},
         .ndisc = 1,
         .mask_width = 5}};
    char err[256];
    for (int k = 0; k < 3; k++) {
        ro_segment_view_t v;
        if (ro__segment_view_parse(data, size, &v, err, sizeof err) != 1 ||
            ro__segment_view_resolve(&v, k == 1 ? NULL : memory, sizeof memory, err, sizeof err) ||
            ro__segment_view_check(&v, &rules[k], err, sizeof err))
            continue;
        for (uint32_t i = 0; i < v.ntensors; i++)
            for (size_t b = 0; b < v.tensors[i].bytes; b++)
                sink += v.tensors[i].data[b];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_segment(data, size);
    ro_frame_reader_t rd;
    ro_pb_alloc_t alloc;
    ro__pb_alloc_init(&alloc, 1u << 20);
    if (ro__frame_reader_init(&rd, 65536, &alloc) != 0)
        return 0;
    size_t off = 0, chunk = size ? (size_t)data[0] % 17 + 1 : 1;
    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        if (ro__frame_reader_feed(&rd, data + off, n) != 0)
            break;
        off += n;
        for (;;) {
            ro_frame_t *f;
            char err[256];
            int rc = ro__frame_reader_next(&rd, &f, err, sizeof err);
            if (rc <= 0) {
                if (rc < 0)
                    off = size; /* a broken stream is closed, not resynchronised */
                break;
            }
            if (!ro__frame_kind(f))
                abort();
            validate(f);
            ro__frame_free(&alloc, f);
        }
    }
    ro__frame_reader_free(&rd);
    if (alloc.used != 0)
        abort(); /* every decoded frame was given back */
    return 0;
}
