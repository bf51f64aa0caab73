/*
 * fidelity_states: the full state behind every entry of a recording, for
 * the fidelity check against Gymnasium (issue 32; fidelity.py drives it).
 *
 *   fidelity_states ENV NODE_SEED [KEY=VALUE]... < commands > answers
 *
 * ENV is a built-in env (cartpole, pendulum or a MuJoCo env), made with the
 * args and the seeds the node gives env i: seed_mix(NODE_SEED, i, ENV), the
 * rule rollout-replay --verify re-creates a recording's envs by. Each
 * command resets or steps one env i (made at its first command), exactly as
 * the node did for the recording's entries of env i, and the answer carries
 * what the env wrote (obs, reward, terminated, the step's code) and the
 * state the env is in afterwards, which the recording does not hold:
 *
 *   cartpole, pendulum  their float64 state (ro__cartpole_get_state, ...)
 *   MuJoCo envs         mj_getState(mjSTATE_INTEGRATION): time, qpos, qvel,
 *                       act, history, warm start, ctrl, applied forces, ...
 *                       (everything the next mj_step starts from), then every
 *                       body's xpos, which Ant-v5 reads before the step and
 *                       mj_setState leaves alone, then the step's reward
 *                       terms (ro__mj_env_terms)
 *
 * fidelity.py checks that obs and reward equal the recording's, bit for bit,
 * so the states are those of the recorded run. A test tool, built for the
 * tests only; it reads the env internals through the test headers of
 * src/envs, and stays out of the env ABI.
 *
 * Binary, little-endian (the host's), on stdin/stdout:
 *   start:   u32 magic 0x31534652 ("RFS1"), u32 obs_dim, u32 act_dim (1 for
 *            a discrete action), u32 nstate, u32 nxpos, u32 nterms
 *   command: u32 env, u32 op (0 reset, 1 step), then for a step act_dim
 *            float32 (discrete: the action as a float)
 *   answer:  i32 rc, float32 obs[obs_dim], float32 reward, u32 terminated,
 *            f64 state[nstate], f64 xpos[nxpos], f64 terms[nterms]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/cartpole.h"
#include "envs/mujoco/mj_envs.h"
#include "envs/mujoco/mj_registry.h"
#include "envs/pendulum.h"
#include "envs/registry.h"
#include "runtime/rng.h"

#define MAX_ENVS 4096u
#define MAX_ARGS 32
#define MAX_DIM 4096u
#define NTERMS 5
#define MAGIC 0x31534652u

typedef struct tool {
    const ro_env_vtable_t *vt;
    ro_env_arg_t args[MAX_ARGS];
    size_t nargs;
    uint64_t node_seed;
    void *envs[MAX_ENVS];
    uint32_t obs_dim, act_dim, nstate, nxpos;
    int discrete, sig;
    float *obs, *act;
    double *state;
} tool_t;

static void die(const char *what)
{
    fprintf(stderr, "fidelity_states: %s\n", what);
    exit(2);
}

static void put(const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, stdout) != n)
        die("cannot write the answer");
}

/* get reads n bytes; 0 at a clean end of the commands. */
static int get(void *p, size_t n)
{
    size_t got = fread(p, 1, n, stdin);
    if (got == 0 && feof(stdin))
        return 0;
    if (got != n)
        die("a command is cut short");
    return 1;
}

static void *instance(tool_t *t, uint32_t i)
{
    if (i >= MAX_ENVS)
        die("env index beyond the tool's table");
    if (t->envs[i] == NULL) {
        char err[256] = "";
        uint64_t seed = ro__seed_mix(t->node_seed, i, RO_STREAM_ENV);
        if (t->vt->create(&t->envs[i], t->args, t->nargs, seed, err, sizeof err) != 0)
            die(err);
    }
    return t->envs[i];
}

/* state_of writes the env's state after its last command. */
static void state_of(tool_t *t, void *env)
{
    if (t->vt == &ro__env_cartpole) {
        ro__cartpole_get_state(env, t->state);
    } else if (t->vt == &ro__env_pendulum) {
        ro__pendulum_get_state(env, t->state);
    } else {
        const mjModel *m = ro__mj_env_model(env);
        mjData *d = ro__mj_env_data(env);
        if (d == NULL)
            die("a MuJoCo env without data (its reset failed)");
        mj_getState(m, d, t->state, t->sig);
        memcpy(t->state + t->nstate - t->nxpos, d->xpos, t->nxpos * sizeof(double));
    }
    put(t->state, t->nstate * sizeof(double));
}

static void answer(tool_t *t, void *env, int32_t rc, float reward, uint32_t terminated)
{
    put(&rc, sizeof rc);
    put(t->obs, t->obs_dim * sizeof(float));
    put(&reward, sizeof reward);
    put(&terminated, sizeof terminated);
    /* state and xpos, as one block of nstate doubles (xpos last) */
    state_of(t, env);
    double terms[NTERMS] = {0};
    if (t->nxpos) {
        ro_mj_terms_t tm;
        ro__mj_env_terms(env, &tm);
        terms[0] = tm.forward;
        terms[1] = tm.ctrl_cost;
        terms[2] = tm.contact_cost;
        terms[3] = tm.survive;
        terms[4] = tm.x_velocity;
    }
    put(terms, sizeof terms);
}

static void open_env(tool_t *t, int argc, char **argv)
{
    char err[256] = "";
    const ro_env_vtable_t *vt = NULL;
    const ro_env_state_ops_t *state_ops = NULL; /* the env ABI's; this tool reads MuJoCo's own */
    if (strcmp(argv[1], "cartpole") == 0)
        vt = &ro__env_cartpole;
    else if (strcmp(argv[1], "pendulum") == 0)
        vt = &ro__env_pendulum;
    else if (ro__mj_lookup(argv[1], &vt, &state_ops, err, sizeof err) != 0 || vt == NULL)
        die("ENV is none of cartpole, pendulum, " RO_MJ_ENV_NAMES);
    t->vt = vt;
    t->node_seed = strtoull(argv[2], NULL, 10);
    for (int i = 3; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (eq == NULL || t->nargs == MAX_ARGS)
            die("args are KEY=VALUE, at most 32");
        *eq = '\0';
        t->args[t->nargs++] = (ro_env_arg_t){argv[i], eq + 1};
    }
    void *env = instance(t, 0); /* env 0 tells the sizes */
    ro_space_t os, as;
    vt->spaces(env, &os, &as);
    t->obs_dim = os.shape[0];
    t->discrete = as.kind == RO_SPACE_DISCRETE;
    t->act_dim = t->discrete ? 1 : as.shape[0];
    if (t->obs_dim > MAX_DIM || t->act_dim > MAX_DIM)
        die("spaces too large");
    if (vt == &ro__env_cartpole) {
        t->nstate = 4;
    } else if (vt == &ro__env_pendulum) {
        t->nstate = 2;
    } else {
        const mjModel *m = ro__mj_env_model(env);
        t->sig = mjSTATE_INTEGRATION;
        t->nxpos = 3 * (uint32_t)m->nbody;
        t->nstate = (uint32_t)mj_stateSize(m, t->sig) + t->nxpos;
    }
    t->obs = calloc(t->obs_dim, sizeof(float));
    t->act = calloc(t->act_dim, sizeof(float));
    t->state = calloc(t->nstate, sizeof(double));
    if (!t->obs || !t->act || !t->state)
        die("out of memory");
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: fidelity_states ENV NODE_SEED [KEY=VALUE]... < commands > answers");
    static tool_t t;
    open_env(&t, argc, argv);
    uint32_t start[6] = {MAGIC, t.obs_dim, t.act_dim, t.nstate - t.nxpos, t.nxpos, NTERMS};
    put(start, sizeof start);
    uint32_t cmd[2];
    while (get(cmd, sizeof cmd)) {
        void *env = instance(&t, cmd[0]);
        if (cmd[1] == 0) {
            t.vt->reset(env, t.obs);
            answer(&t, env, 0, 0.0f, 0);
            continue;
        }
        if (cmd[1] != 1 || !get(t.act, t.act_dim * sizeof(float)))
            die("a command is neither a reset nor a whole step");
        ro_action_t a = {.box = t.act};
        if (t.discrete) {
            if (!(t.act[0] >= 0 && t.act[0] < 1e6f))
                die("a discrete action out of range");
            a = (ro_action_t){.discrete = (int32_t)t.act[0]};
        }
        ro_step_t st = {0};
        int rc = t.vt->step(env, a, t.obs, &st);
        answer(&t, env, rc, st.reward, st.terminated);
    }
    fflush(stdout);
    for (uint32_t i = 0; i < MAX_ENVS; i++)
        if (t.envs[i])
            t.vt->destroy(t.envs[i]);
    free(t.obs);
    free(t.act);
    free(t.state);
    return 0;
}
