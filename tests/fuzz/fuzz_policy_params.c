/*
 * libFuzzer entry point for the PolicyParams loader (-Dfuzz=true, clang):
 * a weights file (--policy FILE) or a pushed policy is untrusted. Every
 * input is decoded and checked against CartPole's spaces; whatever loads
 * must build a policy that runs a forward pass. A format-2 file's layout
 * (PolicyLayout) is also checked against a composite env layout
 * (fuzz_layout: Tuple(Discrete(3), MultiDiscrete([2, 3]), Box(1)), masked,
 * over float32 [4]; the seed composite_h8.pb is of it).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/policy.h"
#include "policy/params.h"
#include "runtime/error.h"
#include "spaces/layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_layout is the composite layout format-2 inputs are checked against
 * (built once; never freed: the fuzzer runs until it exits). */
static const ro_space_layout_t *fuzz_layout(void)
{
    static ro_space_layout_t lay;
    static int built;
    if (!built) {
        static const uint32_t nvec[2] = {2, 3};
        static const float lo[1] = {-1.0f}, hi[1] = {1.0f};
        ro_env_spaces_t sp = {.num_agents = 1, .num_obs = 1, .num_parts = 3, .action_mask = 1};
        sp.obs[0] =
            (ro_tensor_space_t){.name = "x", .dtype = RO_DTYPE_FLOAT32, .ndim = 1, .shape = {4}};
        sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
        sp.act[1] = (ro_action_part_t){.kind = RO_SPACE_MULTI_DISCRETE, .n = 2, .nvec = nvec};
        sp.act[2] = (ro_action_part_t){
            .kind = RO_SPACE_BOX, .ndim = 1, .shape = {1}, .low = lo, .high = hi};
        char err[256];
        if (ro__layout_from_spaces(&lay, &sp, "fuzz", err, sizeof err) != 0)
            abort();
        built = 1;
    }
    return &lay;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const float lo[4] = {-4.8f, -INFINITY, -0.42f, -INFINITY};
    static const float hi[4] = {4.8f, INFINITY, 0.42f, INFINITY};
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {4}, .low = lo, .high = hi};
    ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = 2};
    ro_policy_params_t pp;
    char err[256];
    if (ro__policy_params_decode(&pp, data, size, "fuzz", err, sizeof err) != 0)
        return 0;
    if (pp.layout) {
        int rc = ro__policy_layout_check(ro__policy_params_view(&pp), fuzz_layout(), "fuzz", err,
                                         sizeof err);
        if (rc != 0 && rc != RO_EINVAL)
            abort();
    }
    ro_policy_t *p;
    if (ro__policy_new_from_params(&p, &pp, RO_GEMM_EXACT, &obs, &act, "fuzz", err, sizeof err)) {
        ro__policy_params_free(&pp);
        return 0;
    }
    ro_policy_ws_t *ws;
    if (ro__policy_ws_new(&ws, p, 2) == 0) {
        ro_rng_t r[2], *rp[2] = {&r[0], &r[1]};
        ro__rng_init(&r[0], 1);
        ro__rng_init(&r[1], 2);
        int32_t a[2];
        ro__policy_act(p, ws, 2, rp, a, NULL, NULL, NULL);
        if (a[0] < 0 || a[0] > 1 || a[1] < 0 || a[1] > 1)
            abort();
        ro__policy_ws_free(ws);
    }
    ro__policy_free(p);
    return 0;
}
