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

int ro__mj_lookup(const char *name, const ro_env_vtable_t **vt, char *err, size_t errlen)
{
    *vt = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i]) != 0)
            continue;
#if RO_HAVE_MUJOCO
        *vt = vtables[i];
        return 0;
#else
        return ro__errorf(err, errlen, RO_ENOTSUP,
                          "env '%s' needs MuJoCo, and this rollout was built without it: "
                          "install MuJoCo 2.x (Debian 12: apt-get install libmujoco-dev), "
                          "then rebuild (meson setup --wipe build -Dmujoco=enabled)",
                          name);
#endif
    }
    (void)err;
    (void)errlen;
    return 0;
}

uint64_t ro__mj_warning_count(void)
{
#if RO_HAVE_MUJOCO
    return ro__mj_warnings();
#else
    return 0;
#endif
}
