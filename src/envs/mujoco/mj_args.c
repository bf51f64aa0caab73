/*
 * The MuJoCo envs' args (mj_args.h). Names and meanings are Gymnasium v5's;
 * values are parsed strictly (the whole string, finite, in range).
 */
#include "envs/mujoco/mj_args.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_args.h"
#include "runtime/error.h"

#define MAX_FRAME_SKIP 1000u
#define MAX_WEIGHT 1e6
#define MAX_NOISE 100.0

typedef enum { ARG_STEPS, ARG_WEIGHT, ARG_NOISE, ARG_BOOL, ARG_RANGE, ARG_NAME } arg_type_t;

typedef struct arg_def {
    const char *key;
    arg_type_t type;
    size_t off; /* into ro_mj_params_t */
} arg_def_t;

static const arg_def_t arg_defs[] = {
    {"frame_skip", ARG_STEPS, offsetof(ro_mj_params_t, frame_skip)},
    {"forward_reward_weight", ARG_WEIGHT, offsetof(ro_mj_params_t, forward_w)},
    {"ctrl_cost_weight", ARG_WEIGHT, offsetof(ro_mj_params_t, ctrl_w)},
    {"contact_cost_weight", ARG_WEIGHT, offsetof(ro_mj_params_t, contact_w)},
    {"healthy_reward", ARG_WEIGHT, offsetof(ro_mj_params_t, healthy_w)},
    {"reset_noise_scale", ARG_NOISE, offsetof(ro_mj_params_t, noise)},
    {"terminate_when_unhealthy", ARG_BOOL, offsetof(ro_mj_params_t, terminate_unhealthy)},
    {"exclude_current_positions_from_observation", ARG_BOOL, offsetof(ro_mj_params_t, exclude_x)},
    {"include_cfrc_ext_in_observation", ARG_BOOL, offsetof(ro_mj_params_t, cfrc_obs)},
    {"healthy_state_range", ARG_RANGE, offsetof(ro_mj_params_t, state_range)},
    {"healthy_z_range", ARG_RANGE, offsetof(ro_mj_params_t, z_range)},
    {"healthy_angle_range", ARG_RANGE, offsetof(ro_mj_params_t, angle_range)},
    {"contact_force_range", ARG_RANGE, offsetof(ro_mj_params_t, contact_range)},
    {"main_body", ARG_NAME, offsetof(ro_mj_params_t, main_body)},
};

#define H_FRAME_SKIP(dflt) "frame_skip", "mj_step calls per env step, 1..1000 (default " dflt ")"
#define H_FORWARD                                                                                  \
    "forward_reward_weight", "weight of the forward reward dx/dt, a double (default 1)"
#define H_CTRL(dflt)                                                                               \
    "ctrl_cost_weight", "weight of the control cost sum(action^2), a double (default " dflt ")"
#define H_HEALTHY "healthy_reward", "reward for each step taken while healthy (default 1)"
#define H_TERMINATE                                                                                \
    "terminate_when_unhealthy", "true or false: end the episode when unhealthy (default true)"
#define H_Z(dflt) "healthy_z_range", "LO,HI: open range of healthy torso heights (default " dflt ")"
#define H_ANGLE(dflt)                                                                              \
    "healthy_angle_range", "LO,HI: open range of healthy torso angles (default " dflt ")"
#define H_NOISE(what, dflt)                                                                        \
    "reset_noise_scale", "scale of the reset noise on " what ", 0..100 (default " dflt ")"
#define H_EXCLUDE(what)                                                                            \
    "exclude_current_positions_from_observation",                                                  \
        "true or false: leave " what " out of the observation (default true)"

const char *const ro__mj_keys_inverted_pendulum[] = {
    H_FRAME_SKIP("2"), H_NOISE("qpos and qvel, uniform", "0.01"), NULL};
const char *const ro__mj_keys_hopper[] = {
    H_FRAME_SKIP("4"),
    H_FORWARD,
    H_CTRL("1e-3"),
    H_HEALTHY,
    H_TERMINATE,
    "healthy_state_range",
    "LO,HI: open range for qpos[2:] and qvel (default -100,100)",
    H_Z("0.7,inf"),
    H_ANGLE("-0.2,0.2"),
    H_NOISE("qpos and qvel, uniform", "5e-3"),
    H_EXCLUDE("x"),
    NULL};
const char *const ro__mj_keys_half_cheetah[] = {
    H_FRAME_SKIP("5"), H_FORWARD, H_CTRL("0.1"), H_NOISE("qpos (uniform) and qvel (normal)", "0.1"),
    H_EXCLUDE("x"),    NULL};
const char *const ro__mj_keys_walker2d[] = {
    H_FRAME_SKIP("4"), H_FORWARD,    H_CTRL("1e-3"),  H_HEALTHY,
    H_TERMINATE,       H_Z("0.8,2"), H_ANGLE("-1,1"), H_NOISE("qpos and qvel, uniform", "5e-3"),
    H_EXCLUDE("x"),    NULL};
const char *const ro__mj_keys_ant[] = {
    H_FRAME_SKIP("5"),
    H_FORWARD,
    H_CTRL("0.5"),
    "contact_cost_weight",
    "weight of the contact cost sum(clipped cfrc_ext^2), a double (default 5e-4)",
    H_HEALTHY,
    H_TERMINATE,
    "healthy_z_range",
    "LO,HI: closed range of healthy torso heights (default 0.2,1)",
    "contact_force_range",
    "LO,HI: the range contact forces are clipped to (default -1,1)",
    H_NOISE("qpos (uniform) and qvel (normal)", "0.1"),
    H_EXCLUDE("x and y"),
    "include_cfrc_ext_in_observation",
    "true or false: observe the bodies' clipped contact forces (default true)",
    "main_body",
    "the body whose x displacement is rewarded: a body name or id (default 1, the torso)",
    NULL};

static bool accepts(const char *const *keys, const char *key)
{
    for (size_t i = 0; keys[i] != NULL; i += 2)
        if (strcmp(keys[i], key) == 0)
            return true;
    return false;
}

/* parse_bound reads one end of a range: a number, or inf / -inf. */
static int parse_bound(const char *key, const char *s, double *out, char *err, size_t errlen)
{
    if (strcmp(s, "inf") == 0 || strcmp(s, "+inf") == 0) {
        *out = INFINITY;
        return 0;
    }
    if (strcmp(s, "-inf") == 0) {
        *out = -INFINITY;
        return 0;
    }
    return ro__env_arg_double(key, s, -1e300, 1e300, out, err, errlen);
}

/* parse_range reads "LO,HI" with LO < HI (Gymnasium's tuple). */
static int parse_range(const char *key, const char *value, double r[2], char *err, size_t errlen)
{
    const char *comma = strchr(value, ',');
    char lo[64];
    size_t n = comma ? (size_t)(comma - value) : 0;
    if (comma == NULL || n >= sizeof lo || strchr(comma + 1, ',') != NULL)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env arg '%s': '%s' is not LO,HI (two numbers or inf, e.g. 0.7,inf)", key,
                          value);
    memcpy(lo, value, n);
    lo[n] = '\0';
    double a, b;
    int rc = parse_bound(key, lo, &a, err, errlen);
    if (rc == 0)
        rc = parse_bound(key, comma + 1, &b, err, errlen);
    if (rc < 0)
        return rc;
    if (!(a < b))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env arg '%s': '%s' is an empty range (LO must be below HI)", key, value);
    r[0] = a;
    r[1] = b;
    return 0;
}

static int parse_bool(const char *key, const char *value, bool *out, char *err, size_t errlen)
{
    if (!strcmp(value, "true") || !strcmp(value, "True") || !strcmp(value, "1")) {
        *out = true;
        return 0;
    }
    if (!strcmp(value, "false") || !strcmp(value, "False") || !strcmp(value, "0")) {
        *out = false;
        return 0;
    }
    return ro__errorf(err, errlen, RO_EINVAL, "env arg '%s': '%s' is not true or false", key,
                      value);
}

static int parse_arg(const arg_def_t *def, const char *value, ro_mj_params_t *p, char *err,
                     size_t errlen)
{
    char *field = (char *)p + def->off;
    switch (def->type) {
    case ARG_STEPS:
        return ro__env_arg_u32(def->key, value, 1, MAX_FRAME_SKIP, (uint32_t *)field, err, errlen);
    case ARG_WEIGHT:
        return ro__env_arg_double(def->key, value, -MAX_WEIGHT, MAX_WEIGHT, (double *)field, err,
                                  errlen);
    case ARG_NOISE:
        return ro__env_arg_double(def->key, value, 0.0, MAX_NOISE, (double *)field, err, errlen);
    case ARG_BOOL:
        return parse_bool(def->key, value, (bool *)field, err, errlen);
    case ARG_RANGE:
        return parse_range(def->key, value, (double *)field, err, errlen);
    case ARG_NAME: /* checked against the model by the env */
        if (value[0] == '\0' || strlen(value) >= RO_MJ_NAME_MAX)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "env arg '%s': '%.80s' is not a body name or id (1 to %d bytes)",
                              def->key, value, RO_MJ_NAME_MAX - 1);
        memcpy(field, value, strlen(value) + 1);
        return 0;
    }
    return RO_EINVAL;
}

int ro__mj_parse_args(const char *env, const char *const *keys, const ro_env_arg_t *args,
                      size_t nargs, ro_mj_params_t *p, char *err, size_t errlen)
{
    for (size_t i = 0; i < nargs; i++) {
        const arg_def_t *def = NULL;
        for (size_t j = 0; j < sizeof arg_defs / sizeof arg_defs[0]; j++)
            if (strcmp(arg_defs[j].key, args[i].key) == 0)
                def = &arg_defs[j];
        if (def == NULL || !accepts(keys, args[i].key))
            return ro__errorf(err, errlen, RO_EINVAL, "env '%s' has no arg '%s'", env, args[i].key);
        int rc = parse_arg(def, args[i].value, p, err, errlen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ro__mj_find_body resolves main_body as Gymnasium's data.body() does: a body's
 * name, or its id. */
int ro__mj_find_body(const char *env, const mjModel *m, const char *name, int *out, char *err,
                     size_t errlen)
{
    int id = mj_name2id(m, mjOBJ_BODY, name);
    char *end;
    long n = strtol(name, &end, 10);
    if (id < 0 && *end == '\0' && n >= 0 && n < m->nbody)
        id = (int)n;
    if (id < 0)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s' arg 'main_body': '%s' is no body's name, nor an id in 0..%d",
                          env, name, (int)m->nbody - 1);
    *out = id;
    return 0;
}
