/*
 * Broken plugins for the registry's tests. Built without RO_BAD_ABI it does
 * not export ro_env_plugin at all; with it, it exports one whose vtable
 * claims a future ABI version.
 */
#include <rollout/env.h>

#ifdef RO_BAD_ABI
static const ro_env_vtable_t vtable = {
    .abi_version = RO_ENV_ABI_VERSION + 1,
    .name = "from_the_future",
};

const ro_env_vtable_t *ro_env_plugin(void);

const ro_env_vtable_t *ro_env_plugin(void)
{
    return &vtable;
}
#else
/* Something to export, with a name close to the right one. */
int ro_env_plugin_v0(void);

int ro_env_plugin_v0(void)
{
    return 0;
}
#endif
