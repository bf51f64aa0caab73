/*
 * Finding envs by name (built-ins or dlopen()ed plugins) and checking the
 * user's env args against what an env accepts.
 */
#include "envs/registry.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_args.h"
#include "envs/mujoco/mj_registry.h" /* issue 17: the MuJoCo envs */
#include "runtime/error.h"

/* The arg every env accepts; the runtime consumes it before create(). */
#define MAX_STEPS_KEY "max_episode_steps"

static const ro_env_vtable_t *const builtins[] = {
    &ro__env_cartpole,
    &ro__env_pendulum,
    &ro__env_burn,
};

/* set_err writes a formatted message into err, if the caller gave one. */
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* append_err adds text at the end of the message already in err; text that
 * does not fit is cut, as snprintf would. */
static void append_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    size_t used = strnlen(err, errlen - 1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + used, errlen - used, fmt, ap);
    va_end(ap);
}

/*
 * check_vtable validates what an env hands the runtime, so that the rest of
 * the node can call through it without checking again. `origin` names where
 * the vtable came from in messages.
 */
static int check_vtable(const ro_env_vtable_t *vt, const char *origin, char *err, size_t errlen)
{
    if (vt->abi_version != RO_ENV_ABI_VERSION) {
        set_err(err, errlen,
                "env plugin '%s' was built for env ABI version %u, this runtime "
                "needs version %u: rebuild it against this rollout/env.h",
                origin, vt->abi_version, RO_ENV_ABI_VERSION);
        return RO_ENOTSUP;
    }
    if (vt->name == NULL || vt->name[0] == '\0') {
        set_err(err, errlen, "env plugin '%s' has an empty name", origin);
        return RO_EINVAL;
    }
    const char *missing = NULL;
    if (vt->create == NULL)
        missing = "create";
    else if (vt->spaces == NULL)
        missing = "spaces";
    else if (vt->reset == NULL)
        missing = "reset";
    else if (vt->step == NULL)
        missing = "step";
    else if (vt->destroy == NULL)
        missing = "destroy";
    if (missing != NULL) {
        set_err(err, errlen, "env plugin '%s' (env '%s') leaves %s() NULL", origin, vt->name,
                missing);
        return RO_EINVAL;
    }
    if (vt->arg_keys == NULL) {
        set_err(err, errlen,
                "env plugin '%s' (env '%s') has arg_keys NULL; an env without args uses a "
                "list holding only NULL",
                origin, vt->name);
        return RO_EINVAL;
    }
    /* Keys sit at even indices, each followed by its help text. */
    for (size_t i = 0; vt->arg_keys[i] != NULL; i += 2) {
        const char *key = vt->arg_keys[i];
        if (key[0] == '\0' || strcmp(key, MAX_STEPS_KEY) == 0) {
            set_err(err, errlen, "env plugin '%s' (env '%s') declares arg '%s', which %s", origin,
                    vt->name, key, key[0] == '\0' ? "is empty" : "the runtime reserves for itself");
            return RO_EINVAL;
        }
        if (vt->arg_keys[i + 1] == NULL) {
            set_err(err, errlen, "env plugin '%s' (env '%s') declares arg '%s' without help text",
                    origin, vt->name, key);
            return RO_EINVAL;
        }
    }
    return 0;
}

/* is_plugin_path tells a plugin path from a built-in name: ro__env_open's
 * rule is "contains '/' or ends in .so". */
static int is_plugin_path(const char *name)
{
    size_t len = strlen(name);
    return strchr(name, '/') != NULL || (len > 3 && strcmp(name + len - 3, ".so") == 0);
}

/* open_plugin loads a plugin shared object and validates its vtable. */
static int open_plugin(ro_env_kind_t *out, const char *path, char *err, size_t errlen)
{
    /* RTLD_NOW: a missing symbol fails here, on the main thread, with a
     * message, not later in a worker. RTLD_LOCAL: two plugins cannot clash. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        set_err(err, errlen, "cannot load env plugin '%s': %s", path,
                why != NULL ? why : "unknown dlopen error");
        return RO_ENOENT;
    }

    int rc;
    /* Clear any stale error so that a NULL from dlsym is reported right. */
    dlerror();
    void *sym = dlsym(h, RO_ENV_PLUGIN_SYMBOL);
    if (sym == NULL) {
        const char *why = dlerror();
        set_err(err, errlen, "env plugin '%s' does not export %s(): %s", path, RO_ENV_PLUGIN_SYMBOL,
                why != NULL ? why : "the symbol is NULL");
        rc = RO_ENOENT;
        goto fail;
    }

    /* POSIX guarantees a data pointer from dlsym converts to a function
     * pointer; ISO C does not, hence the copy through memcpy. */
    ro_env_plugin_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    const ro_env_vtable_t *vt = fn();
    if (vt == NULL) {
        set_err(err, errlen, "env plugin '%s': %s() returned NULL", path, RO_ENV_PLUGIN_SYMBOL);
        rc = RO_EINVAL;
        goto fail;
    }
    rc = check_vtable(vt, path, err, errlen);
    if (rc < 0)
        goto fail;

    out->vt = vt;
    out->dl_handle = h;
    return 0;

fail:
    dlclose(h);
    return rc;
}

int ro__env_open(ro_env_kind_t *out, const char *name, char *err, size_t errlen)
{
    out->vt = NULL;
    out->dl_handle = NULL;
    if (name == NULL)
        name = "";

    if (is_plugin_path(name))
        return open_plugin(out, name, err, errlen);

    const ro_env_vtable_t *vt = NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(builtins[i]->name, name) == 0)
            vt = builtins[i];
    /* issue 17: the MuJoCo envs (or why this build has none). */
    if (vt == NULL) {
        int rc = ro__mj_lookup(name, &vt, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (vt != NULL) {
        int rc = check_vtable(vt, name, err, errlen);
        if (rc < 0)
            return rc;
        out->vt = vt;
        return 0;
    }
    set_err(err, errlen, "unknown env '%s' (built-ins: %s; or a path to a plugin .so)", name,
            RO_ENV_BUILTIN_NAMES RO_MJ_BUILTIN_NAMES);
    return RO_ENOENT;
}

void ro__env_close(ro_env_kind_t *kind)
{
    if (kind == NULL)
        return;
    if (kind->dl_handle != NULL)
        dlclose(kind->dl_handle);
    kind->dl_handle = NULL;
    kind->vt = NULL;
}

/* env_accepts tells whether key is one of vt's own arg keys. */
static int env_accepts(const ro_env_vtable_t *vt, const char *key)
{
    for (size_t i = 0; vt->arg_keys[i] != NULL; i += 2)
        if (strcmp(vt->arg_keys[i], key) == 0)
            return 1;
    return 0;
}

/* unknown_key_err writes "env 'x' has no arg 'k' (accepted: ...)". */
static void unknown_key_err(const ro_env_vtable_t *vt, const char *key, char *err, size_t errlen)
{
    set_err(err, errlen, "env '%s' has no arg '%s' (accepted: %s", vt->name, key, MAX_STEPS_KEY);
    for (size_t i = 0; vt->arg_keys[i] != NULL; i += 2)
        append_err(err, errlen, ", %s", vt->arg_keys[i]);
    append_err(err, errlen, ")");
}

int ro__env_check_args(const ro_env_vtable_t *vt, const ro_env_arg_t *args, size_t n,
                       ro_env_arg_t *out, size_t *nout, uint32_t *max_steps, char *err,
                       size_t errlen)
{
    uint32_t steps = vt->max_episode_steps;
    size_t kept = 0;

    for (size_t i = 0; i < n; i++) {
        const char *key = args[i].key;
        if (key == NULL || args[i].value == NULL) {
            set_err(err, errlen, "env '%s': arg %zu has no %s", vt->name, i,
                    key == NULL ? "key" : "value");
            return RO_EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(args[j].key, key) == 0) {
                set_err(err, errlen, "env '%s' got arg '%s' twice ('%s' and '%s')", vt->name, key,
                        args[j].value, args[i].value);
                return RO_EINVAL;
            }
        }
        if (strcmp(key, MAX_STEPS_KEY) == 0) {
            int rc = ro__env_arg_u32(key, args[i].value, 0, UINT32_MAX, &steps, err, errlen);
            if (rc < 0)
                return rc;
            continue;
        }
        if (!env_accepts(vt, key)) {
            unknown_key_err(vt, key, err, errlen);
            return RO_EINVAL;
        }
        out[kept++] = args[i];
    }

    *nout = kept;
    *max_steps = steps;
    return 0;
}
