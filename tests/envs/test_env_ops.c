/* Unit tests of src/envs/env_ops.c's steps in parts: a kind without parts
 * steps whole at part 0, and a plugin's positive return code reads as a
 * failure (RO_EINVAL), never as "parts remain" (the vector engine would
 * call it again and again); a MuJoCo kind's parts, where the build has
 * MuJoCo, are its frames, and stepping them equals the vtable's step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "envs/env_ops.h"
#include "envs/registry.h"
#include "ro_build_config.h"
#include "runtime/error.h"

static int code; /* what fake_step returns */
static int calls;

static int fake_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    (void)env;
    (void)action;
    obs[0] = 1.0f;
    out->reward = 2.0f;
    calls++;
    return code;
}

static const ro_env_vtable_t fake_vt = {.name = "fake", .step = fake_step};

static void one_part_and_positive_codes(void **state)
{
    (void)state;
    ro_env_kind_t k = {.vt = &fake_vt};
    float obs[1] = {0}, box[1] = {0};
    void *t[1] = {obs};
    ro_step_t st;
    const int codes[] = {0, -5, 1, 7};
    const int want[] = {0, -5, RO_EINVAL, RO_EINVAL};
    for (int i = 0; i < 4; i++) {
        code = codes[i];
        calls = 0;
        assert_int_equal(ro__env_step_part(&k, NULL, 0, NULL, box, t, NULL, &st, 1), want[i]);
        assert_int_equal(calls, 1);
        assert_true(st.reward == 2.0f);
    }
}

static void mujoco_parts_are_its_frames(void **state)
{
    (void)state;
#if RO_HAVE_MUJOCO
    ro_env_kind_t k;
    char err[256];
    assert_int_equal(ro__env_open(&k, "hopper", err, sizeof err), 0);
    assert_non_null(k.step_part);
    void *a = NULL, *b = NULL;
    assert_int_equal(ro__env_create(&k, &a, NULL, 0, 9, 0, err, sizeof err), 0);
    assert_int_equal(ro__env_create(&k, &b, NULL, 0, 9, 1, err, sizeof err), 0);
    float oa[11], ob[11];
    void *ta[1] = {oa}, *tb[1] = {ob};
    ro__env_reset(&k, a, ta, NULL);
    ro__env_reset(&k, b, tb, NULL);
    const float act[3] = {0.3f, -0.7f, 0.1f};
    for (int s = 0; s < 20; s++) {
        ro_step_t sa, sb;
        assert_int_equal(ro__env_step(&k, a, NULL, act, ta, NULL, &sa, 1), 0);
        uint32_t part = 0;
        int rc;
        while ((rc = ro__env_step_part(&k, b, part, NULL, act, tb, NULL, &sb, 1)) > 0)
            part++;
        assert_int_equal(rc, 0);
        assert_int_equal(part + 1, 4); /* Hopper-v5's frame skip */
        assert_memory_equal(oa, ob, sizeof oa);
        assert_memory_equal(&sa, &sb, sizeof sa);
        if (sa.terminated) {
            ro__env_reset(&k, a, ta, NULL);
            ro__env_reset(&k, b, tb, NULL);
        }
    }
    ro__env_destroy(&k, a);
    ro__env_destroy(&k, b);
    ro__env_close(&k);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_part_and_positive_codes),
        cmocka_unit_test(mujoco_parts_are_its_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
