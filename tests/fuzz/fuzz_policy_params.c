/*
 * libFuzzer entry point for the PolicyParams loader (-Dfuzz=true, clang):
 * a weights file (--policy FILE) or a pushed policy is untrusted. Every
 * input is decoded and checked against CartPole's spaces; whatever loads
 * must build a policy that runs a forward pass.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/policy.h"
#include "policy/params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
        ro__policy_act(p, ws, 2, rp, a, NULL);
        if (a[0] < 0 || a[0] > 1 || a[1] < 0 || a[1] > 1)
            abort();
        ro__policy_ws_free(ws);
    }
    ro__policy_free(p);
    return 0;
}
