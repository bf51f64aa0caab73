/*
 * Finding a MuJoCo env by name (mj_registry.h). Built whether or not MuJoCo
 * was found: without it, naming one of the envs gets a message that says how
 * to get them, not "unknown env".
 */
#include "envs/mujoco/mj_registry.h"

#include <string.h>

#include "runtime/error.h"
#if RO_HAVE_MUJOCO
#include "envs/mujoco/mj_runtime.h"
#endif

static const char *const names[] = {"inverted_pendulum", "hopper", "half_cheetah", "walker2d",
                                    "ant"};

#if RO_HAVE_MUJOCO
static const ro_env_vtable_t *const vtables[] = {&ro__env_inverted_pendulum, &ro__env_hopper,
                                                 &ro__env_half_cheetah, &ro__env_walker2d,
                                                 &ro__env_ant};
#endif

int ro__mj_lookup(const char *name, const ro_env_vtable_t **vt, const ro_env_state_ops_t **state,
                  char *err, size_t errlen)
{
    *vt = NULL;
    *state = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i]) != 0)
            continue;
#if RO_HAVE_MUJOCO
        *vt = vtables[i];
        *state = &ro__mj_state;
        return 0;
#else
        return ro__errorf(err, errlen, RO_ENOTSUP,
                          "env '%s' needs MuJoCo, and this rollout was built without it: "
                          "install the mujoco Python package of python/requirements.txt "
                          "(.ci/install-deps puts it in .venv), then rebuild (meson setup "
                          "--wipe build -Dmujoco=enabled)",
                          name);
#endif
    }
    (void)err;
    (void)errlen;
    return 0;
}

const char *ro__mj_version_of(const ro_env_vtable_t *vt)
{
#if RO_HAVE_MUJOCO
    for (size_t i = 0; vt != NULL && i < sizeof vtables / sizeof vtables[0]; i++)
        if (vt == vtables[i])
            return ro__mj_version_string();
#endif
    (void)vt;
    return NULL;
}

ro_env_step_part_fn ro__mj_step_part_of(const ro_env_vtable_t *vt)
{
#if RO_HAVE_MUJOCO
    for (size_t i = 0; vt != NULL && i < sizeof vtables / sizeof vtables[0]; i++)
        if (vt == vtables[i])
            return ro__mj_step_part;
#endif
    (void)vt;
    return NULL;
}

const char *ro__mj_version(void)
{
#if RO_HAVE_MUJOCO
    return ro__mj_version_string();
#else
    return NULL;
#endif
}

uint64_t ro__mj_warning_count(void)
{
#if RO_HAVE_MUJOCO
    return ro__mj_warnings();
#else
    return 0;
#endif
}
