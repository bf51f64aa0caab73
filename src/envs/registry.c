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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_args.h"
#include "envs/mujoco/mj_registry.h" /* issue 17: the MuJoCo envs */
#include "envs/pyenv_host.h"         /* issue 33: Python envs */
#include "runtime/error.h"
#include "runtime/text.h"

/* The arg every env accepts; the runtime consumes it before create(). */
#define MAX_STEPS_KEY "max_episode_steps"

/* The built-ins and their env state functions. */
static const struct {
    const ro_env_vtable_t *vt;
    const ro_env_state_ops_t *state;
} builtins[] = {
    {&ro__env_cartpole, &ro__cartpole_state},
    {&ro__env_pendulum, &ro__pendulum_state},
    {&ro__env_burn, &ro__burn_state},
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

/* MISSING_FN: the first function every env needs that vt, a vtable of
 * either ABI, leaves NULL ("create", ...), or NULL. */
#define MISSING_FN(vt)                                                                             \
    (!(vt)->create    ? "create"                                                                   \
     : !(vt)->spaces  ? "spaces"                                                                   \
     : !(vt)->reset   ? "reset"                                                                    \
     : !(vt)->step    ? "step"                                                                     \
     : !(vt)->destroy ? "destroy"                                                                  \
                      : NULL)

/*
 * check_common validates what both ABI versions share, so that the rest of
 * the node can call through a vtable without checking again: a name, every
 * required function (missing names the first NULL one, or is NULL) and the
 * arg keys. `origin` names where the vtable came from in messages.
 */
static int check_common(const char *origin, const char *name, const char *const *arg_keys,
                        const char *missing, char *err, size_t errlen)
{
    if (name == NULL || name[0] == '\0') {
        set_err(err, errlen, "env plugin '%s' has an empty name", origin);
        return RO_EINVAL;
    }
    if (missing != NULL) {
        set_err(err, errlen, "env plugin '%s' (env '%s') leaves %s() NULL", origin, name, missing);
        return RO_EINVAL;
    }
    if (arg_keys == NULL) {
        set_err(err, errlen,
                "env plugin '%s' (env '%s') has arg_keys NULL; an env without args uses a "
                "list holding only NULL",
                origin, name);
        return RO_EINVAL;
    }
    /* Keys sit at even indices, each followed by its help text. */
    for (size_t i = 0; arg_keys[i] != NULL; i += 2) {
        const char *key = arg_keys[i];
        if (key[0] == '\0' || strcmp(key, MAX_STEPS_KEY) == 0) {
            set_err(err, errlen, "env plugin '%s' (env '%s') declares arg '%s', which %s", origin,
                    name, key, key[0] == '\0' ? "is empty" : "the runtime reserves for itself");
            return RO_EINVAL;
        }
        if (arg_keys[i + 1] == NULL) {
            set_err(err, errlen, "env plugin '%s' (env '%s') declares arg '%s' without help text",
                    origin, name, key);
            return RO_EINVAL;
        }
    }
    return 0;
}

/* check_vtable validates an ABI 1 vtable. */
static int check_vtable(const ro_env_vtable_t *vt, const char *origin, char *err, size_t errlen)
{
    if (vt->abi_version != RO_ENV_ABI_VERSION) {
        set_err(err, errlen,
                "env plugin '%s' was built for env ABI version %u, this runtime "
                "needs version %u: rebuild it against this rollout/env.h",
                origin, vt->abi_version, RO_ENV_ABI_VERSION);
        return RO_ENOTSUP;
    }
    return check_common(origin, vt->name, vt->arg_keys, MISSING_FN(vt), err, errlen);
}

/*
 * check_state validates an env's state functions (rollout/env.h "Env
 * state"): all three or none. On success *out holds them (zero: none).
 */
static int check_state(const char *origin, const char *name, size_t (*size)(void *),
                       int (*save)(void *, void *, size_t),
                       int (*load)(void *, const void *, size_t), ro_env_state_ops_t *out,
                       char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!size && !save && !load)
        return 0;
    if (!size || !save || !load) {
        set_err(err, errlen,
                "env plugin '%s' (env '%s') leaves %s() NULL: give state_size(), save_state() "
                "and load_state(), or none",
                origin, name,
                !size   ? "state_size"
                : !save ? "save_state"
                        : "load_state");
        return RO_EINVAL;
    }
    *out = (ro_env_state_ops_t){.version = RO_ENV_STATE_VERSION,
                                .size = sizeof *out,
                                .state_size = size,
                                .save_state = save,
                                .load_state = load};
    return 0;
}

/* check_state_ops validates the ro_env_state_ops_t of an ABI 1 env (a
 * built-in's, or what a plugin's ro_env_state_plugin() returned). */
static int check_state_ops(const ro_env_state_ops_t *ops, const char *origin, const char *name,
                           ro_env_state_ops_t *out, char *err, size_t errlen)
{
    const size_t required = offsetof(ro_env_state_ops_t, load_state) + sizeof ops->load_state;
    if (ops->version != RO_ENV_STATE_VERSION || ops->size < required) {
        set_err(err, errlen,
                "env plugin '%s' (env '%s'): %s() returned state functions of version %u, size "
                "%u; this runtime needs version %u, size >= %zu: rebuild it against this "
                "rollout/env.h",
                origin, name, RO_ENV_STATE_PLUGIN_SYMBOL, ops->version, ops->size,
                RO_ENV_STATE_VERSION, required);
        return RO_ENOTSUP;
    }
    return check_state(origin, name, ops->state_size, ops->save_state, ops->load_state, out, err,
                       errlen);
}

/*
 * check_vtable_abi2 validates an ABI 2 vtable as check_vtable does an ABI 1 one
 * and copies it into *copy (fields past the plugin's size zeroed: the
 * plugin predates them).
 */
static int check_vtable_abi2(const ro_env2_vtable_t *vt, const char *origin, ro_env2_vtable_t *copy,
                             char *err, size_t errlen)
{
    if (vt->abi_version != RO_ENV_ABI2_VERSION) {
        set_err(err, errlen,
                "env plugin '%s' exports %s() with env ABI version %u; this runtime loads "
                "version %u from %s() and version %u from %s(): rebuild it against this "
                "rollout/env.h",
                origin, RO_ENV2_PLUGIN_SYMBOL, vt->abi_version, RO_ENV_ABI2_VERSION,
                RO_ENV2_PLUGIN_SYMBOL, RO_ENV_ABI_VERSION, RO_ENV_PLUGIN_SYMBOL);
        return RO_ENOTSUP;
    }
    const size_t required = offsetof(ro_env2_vtable_t, destroy) + sizeof vt->destroy;
    if (vt->size < required) {
        set_err(err, errlen,
                "env plugin '%s' has an ABI 2 vtable of size %u; the required fields take %zu "
                "bytes (set size = sizeof(ro_env2_vtable_t))",
                origin, vt->size, required);
        return RO_EINVAL;
    }
    memset(copy, 0, sizeof *copy);
    memcpy(copy, vt, vt->size < sizeof *copy ? vt->size : sizeof *copy);
    int rc = check_common(origin, copy->name, copy->arg_keys, MISSING_FN(copy), err, errlen);
    if (rc == 0 && !copy->metric_names != !copy->episode_metrics) {
        set_err(err, errlen, "env plugin '%s' (env '%s') sets %s but not %s: give both or neither",
                origin, copy->name, copy->metric_names ? "metric_names" : "episode_metrics()",
                copy->metric_names ? "episode_metrics()" : "metric_names");
        rc = RO_EINVAL;
    }
    return rc;
}

/* open_plugin_abi2 takes an ABI 2 entry point: its vtable, checked and copied
 * into the kind. */
static int open_plugin_abi2(ro_env_kind_t *out, void *sym, const char *path, char *err,
                            size_t errlen)
{
    ro_env2_plugin_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    const ro_env2_vtable_t *vt = fn();
    if (vt == NULL) {
        set_err(err, errlen, "env plugin '%s': %s() returned NULL", path, RO_ENV2_PLUGIN_SYMBOL);
        return RO_EINVAL;
    }
    ro_env2_vtable_t *copy = malloc(sizeof *copy);
    if (!copy) {
        set_err(err, errlen, "out of memory loading env plugin '%s'", path);
        return RO_ENOMEM;
    }
    int rc = check_vtable_abi2(vt, path, copy, err, errlen);
    if (rc == 0)
        rc = check_state(path, copy->name, copy->state_size, copy->save_state, copy->load_state,
                         &out->state, err, errlen);
    if (rc < 0) {
        free(copy);
        return rc;
    }
    out->vt2 = copy;
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
    /* ABI 2 first: a plugin that exports both is an ABI 2 env. */
    dlerror();
    void *sym2 = dlsym(h, RO_ENV2_PLUGIN_SYMBOL);
    if (sym2 != NULL) {
        if ((rc = open_plugin_abi2(out, sym2, path, err, errlen)) < 0)
            goto fail;
        out->dl_handle = h;
        return 0;
    }
    /* Clear any stale error so that a NULL from dlsym is reported right. */
    dlerror();
    void *sym = dlsym(h, RO_ENV_PLUGIN_SYMBOL);
    if (sym == NULL) {
        const char *why = dlerror();
        set_err(err, errlen,
                "env plugin '%s' does not export %s() (env ABI 1) or %s() (env ABI 2): %s", path,
                RO_ENV_PLUGIN_SYMBOL, RO_ENV2_PLUGIN_SYMBOL,
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
    /* The optional state functions of an ABI 1 plugin: a second symbol,
     * since the ABI 1 vtable has no size to grow by. */
    dlerror();
    void *ssym = dlsym(h, RO_ENV_STATE_PLUGIN_SYMBOL);
    if (ssym != NULL) {
        ro_env_state_plugin_fn sfn;
        memcpy(&sfn, &ssym, sizeof sfn);
        const ro_env_state_ops_t *ops = sfn();
        if (ops == NULL) {
            set_err(err, errlen, "env plugin '%s': %s() returned NULL", path,
                    RO_ENV_STATE_PLUGIN_SYMBOL);
            rc = RO_EINVAL;
            goto fail;
        }
        if ((rc = check_state_ops(ops, path, vt->name, &out->state, err, errlen)) < 0)
            goto fail;
    }

    out->vt = vt;
    out->dl_handle = h;
    return 0;

fail:
    dlclose(h);
    return rc;
}

/* open_python makes a Python env's kind: its host and a copy of its
 * vtable (the kind owns both). */
static int open_python(ro_env_kind_t *out, const char *name, char *err, size_t errlen)
{
    int rc = ro__pyhost_open(&out->py, name, err, errlen);
    if (rc)
        return rc;
    ro_env2_vtable_t *copy = malloc(sizeof *copy);
    if (!copy) {
        ro__pyhost_close(out->py);
        out->py = NULL;
        set_err(err, errlen, "out of memory opening env '%s'", name);
        return RO_ENOMEM;
    }
    *copy = *ro__pyhost_vtable(out->py);
    out->vt2 = copy;
    return 0;
}

int ro__env_open(ro_env_kind_t *out, const char *name, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (name == NULL)
        name = "";

    if (ro__pyhost_is_name(name))
        return open_python(out, name, err, errlen);
    if (is_plugin_path(name))
        return open_plugin(out, name, err, errlen);
    return ro__env_open_builtin(out, name, err, errlen);
}

int ro__env_open_builtin(ro_env_kind_t *out, const char *name, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (name == NULL)
        name = "";
    const ro_env_vtable_t *vt = NULL;
    const ro_env_state_ops_t *state = NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(builtins[i].vt->name, name) == 0) {
            vt = builtins[i].vt;
            state = builtins[i].state;
        }
    /* issue 17: the MuJoCo envs (or why this build has none). */
    if (vt == NULL) {
        int rc = ro__mj_lookup(name, &vt, &state, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (vt != NULL) {
        int rc = check_vtable(vt, name, err, errlen);
        if (rc == 0 && state != NULL)
            rc = check_state_ops(state, name, vt->name, &out->state, err, errlen);
        if (rc < 0)
            return rc;
        out->vt = vt;
        out->step_part = ro__mj_step_part_of(vt);
        return 0;
    }
    char shown[160];
    set_err(err, errlen,
            "unknown env '%s' (built-ins: %s; Python envs: %s; or a path to a plugin .so)",
            ro__text_log(shown, sizeof shown, name, 100), RO_ENV_BUILTIN_NAMES RO_MJ_BUILTIN_NAMES,
            RO_ENV_PYTHON_NAMES);
    return RO_ENOENT;
}

/* The most values of a space: what the wire accepts (wire/checks.h), so a
 * node never welcomes learners with a space they must refuse. */
#define MAX_SPACE_VALUES (1u << 20)

/* check_box validates one box space; what names it in messages. */
static int check_box(const ro_env_vtable_t *vt, const ro_space_t *s, const char *what, char *err,
                     size_t errlen)
{
    if (s->ndim < 1 || s->ndim > RO_SPACE_MAX_DIMS) {
        set_err(err, errlen, "env '%s': the %s box has %u dims; expected 1..%d", vt->name, what,
                s->ndim, RO_SPACE_MAX_DIMS);
        return RO_EINVAL;
    }
    size_t n = 1;
    for (uint32_t d = 0; d < s->ndim; d++) {
        if (s->shape[d] < 1 || n * s->shape[d] > MAX_SPACE_VALUES) {
            set_err(err, errlen,
                    "env '%s': the %s box has shape[%u] = %u; expected at least 1 and at most "
                    "%u values in all",
                    vt->name, what, d, s->shape[d], MAX_SPACE_VALUES);
            return RO_EINVAL;
        }
        n *= s->shape[d];
    }
    if (!s->low || !s->high) {
        set_err(err, errlen, "env '%s': the %s box's %s bounds are NULL", vt->name, what,
                !s->low ? "low" : "high");
        return RO_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (!(s->low[i] <= s->high[i])) { /* also NaN */
            set_err(err, errlen, "env '%s': the %s box's bounds [%g, %g] at %zu are not a range",
                    vt->name, what, (double)s->low[i], (double)s->high[i], i);
            return RO_EINVAL;
        }
    return 0;
}

int ro__env_check_spaces(const ro_env_vtable_t *vt, const ro_space_t *obs, const ro_space_t *act,
                         char *err, size_t errlen)
{
    if (obs->kind != RO_SPACE_BOX) {
        set_err(err, errlen, "env '%s': the observation space must be a box (kind %d)", vt->name,
                (int)obs->kind);
        return RO_EINVAL;
    }
    int rc = check_box(vt, obs, "observation", err, errlen);
    if (rc)
        return rc;
    if (act->kind == RO_SPACE_DISCRETE) {
        if (act->n < 1 || act->n > MAX_SPACE_VALUES) {
            set_err(err, errlen,
                    "env '%s': the action space has %u discrete actions; expected "
                    "1..%u",
                    vt->name, act->n, MAX_SPACE_VALUES);
            return RO_EINVAL;
        }
        return 0;
    }
    if (act->kind != RO_SPACE_BOX) {
        set_err(err, errlen, "env '%s': the action space's kind %d is neither discrete nor box",
                vt->name, (int)act->kind);
        return RO_EINVAL;
    }
    return check_box(vt, act, "action", err, errlen);
}

void ro__env_close(ro_env_kind_t *kind)
{
    if (kind == NULL)
        return;
    if (kind->dl_handle != NULL)
        dlclose(kind->dl_handle);
    ro__pyhost_close(kind->py);
    free((void *)kind->vt2); /* the kind's own copy */
    memset(kind, 0, sizeof *kind);
}

/* unknown_key_err writes "env 'x' has no arg 'k' (accepted: ...)". */
static void unknown_key_err(const ro_env_vtable_t *vt, const char *key, char *err, size_t errlen)
{
    char list[512];
    ro__text_join(list, sizeof list, vt->arg_keys, 2, ", ");
    set_err(err, errlen, "env '%s' has no arg '%s' (accepted: %s%s%s)", vt->name, key,
            MAX_STEPS_KEY, list[0] ? ", " : "", list);
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
        if (!ro__env_arg_key_known(vt->arg_keys, key)) {
            unknown_key_err(vt, key, err, errlen);
            return RO_EINVAL;
        }
        out[kept++] = args[i];
    }

    *nout = kept;
    *max_steps = steps;
    return 0;
}

int ro__env_probe(const ro_env_vtable_t *vt, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                  char *err, size_t errlen)
{
    void *env = NULL;
    int rc = vt->create(&env, args, nargs, seed, err, errlen);
    if (rc)
        return rc < 0 ? rc : RO_EINVAL;
    ro_space_t obs, act;
    memset(&obs, 0, sizeof obs);
    memset(&act, 0, sizeof act);
    vt->spaces(env, &obs, &act);
    rc = ro__env_check_spaces(vt, &obs, &act, err, errlen);
    vt->destroy(env);
    return rc;
}
