/*
 * An env ABI 2 example plugin: a small cooperative grid world with two
 * agents, a Dict observation, action masks and per-episode metrics, built
 * against the installed <rollout/env.h> only.
 *
 *     gcc -O2 -shared -fPIC -I<prefix>/include gridworld.c -o libgridworld.so
 *     rollout-node --env ./libgridworld.so --policy mlp
 *
 * A 7x7 room (walls around it and a few inside) holds a goal and two
 * agents. Each step every agent moves up, down, left, right or stays;
 * moves into a wall are masked (the mask says so, and the env refuses such
 * an action: a step given one fails, which the node counts, so a run with
 * no env failures shows that masks were honoured end to end). When an
 * agent reaches the goal both get +1 and the episode terminates; every
 * step costs each agent 0.01; the runtime cuts episodes at 50 steps.
 *
 * Observation of each agent (the order the tensors are declared in is the
 * order the MLP reads them):
 *   "view" uint8 [7, 7]: 0 floor, 255 wall, 128 goal, 192 itself, 64 the other
 *   "pos"  int32 [2]:    its row and column
 *   "goal" int32 [2]:    the goal's row and column
 * Metrics: "success" (1 if the goal was reached, else 0), "length".
 * Argument: agents=1 or 2 (default 2): alone, an agent sees no other.
 */
#include <rollout/env.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIDE 7
#define AGENTS 2  /* at most */
#define ACTIONS 5 /* up, down, left, right, stay */
#define STEP_COST 0.01f

/* '#' wall, '.' floor. */
static const char room[SIDE][SIDE + 1] = {
    "#######", "#.....#", "#.#.#.#", "#.....#", "#.#.#.#", "#.....#", "#######",
};
static const int moves[ACTIONS][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}, {0, 0}};

typedef struct grid {
    uint64_t rng; /* splitmix64: all of the instance's randomness */
    int agents;   /* 1 or AGENTS */
    int pos[AGENTS][2];
    int goal[2];
    uint32_t steps;
    int success;
} grid_t;

static const char *const arg_keys[] = {"agents", "1 or 2 agents in the room (default 2)", NULL};
static const char *const metric_names[] = {"success", "length", NULL};

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* random_floor picks a floor cell no agent nor the goal holds yet. */
static void random_floor(grid_t *g, int taken, int out[2])
{
    for (;;) {
        int r = 1 + (int)(next_u64(&g->rng) % (SIDE - 2));
        int c = 1 + (int)(next_u64(&g->rng) % (SIDE - 2));
        int clash = room[r][c] == '#';
        for (int a = 0; a < taken; a++)
            clash |= g->pos[a][0] == r && g->pos[a][1] == c;
        clash |= taken >= 0 && g->goal[0] == r && g->goal[1] == c;
        if (!clash) {
            out[0] = r;
            out[1] = c;
            return;
        }
    }
}

static int gw_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                     size_t errlen)
{
    int agents = AGENTS;
    for (size_t i = 0; i < nargs; i++)
        if (!strcmp(args[i].key, "agents")) {
            if (strcmp(args[i].value, "1") && strcmp(args[i].value, "2")) {
                snprintf(err, errlen, "gridworld: agents=%s: expected 1 or 2", args[i].value);
                return -EINVAL;
            }
            agents = args[i].value[0] - '0';
        }
    grid_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "gridworld: out of memory");
        return -ENOMEM;
    }
    g->agents = agents;
    g->rng = seed;
    /* Every piece on a floor cell from the start, so that even the state
     * of an instance not yet reset is one load_state() accepts. */
    for (int a = 0; a < AGENTS; a++)
        g->pos[a][0] = g->pos[a][1] = 1;
    g->goal[0] = g->goal[1] = 1;
    *out = g;
    return 0;
}

static void gw_spaces(void *env, ro_env_spaces_t *sp)
{
    const grid_t *g = env;
    sp->num_agents = (uint32_t)g->agents;
    sp->num_obs = 3;
    sp->obs[0] = (ro_tensor_space_t){
        .name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {SIDE, SIDE}};
    sp->obs[1] =
        (ro_tensor_space_t){.name = "pos", .dtype = RO_DTYPE_INT32, .ndim = 1, .shape = {2}};
    sp->obs[2] =
        (ro_tensor_space_t){.name = "goal", .dtype = RO_DTYPE_INT32, .ndim = 1, .shape = {2}};
    sp->num_parts = 1;
    sp->act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = ACTIONS};
    sp->action_mask = 1;
}

/* observe writes every agent's tensors and its mask (moves into walls are
 * not allowed; staying always is). */
static void observe(const grid_t *g, const ro_obs_out_t *o)
{
    uint8_t *view = o->tensors[0];
    int32_t *pos = o->tensors[1], *goal = o->tensors[2];
    for (int a = 0; a < g->agents; a++) {
        uint8_t *v = view + a * SIDE * SIDE;
        for (int r = 0; r < SIDE; r++)
            for (int c = 0; c < SIDE; c++)
                v[r * SIDE + c] = room[r][c] == '#' ? 255 : 0;
        v[g->goal[0] * SIDE + g->goal[1]] = 128;
        if (g->agents == 2)
            v[g->pos[1 - a][0] * SIDE + g->pos[1 - a][1]] = 64;
        v[g->pos[a][0] * SIDE + g->pos[a][1]] = 192;
        pos[2 * a] = g->pos[a][0];
        pos[2 * a + 1] = g->pos[a][1];
        goal[2 * a] = g->goal[0];
        goal[2 * a + 1] = g->goal[1];
        for (int m = 0; m < ACTIONS; m++)
            o->mask[a * ACTIONS + m] =
                room[g->pos[a][0] + moves[m][0]][g->pos[a][1] + moves[m][1]] != '#';
    }
}

static void gw_reset(void *env, const ro_obs_out_t *o)
{
    grid_t *g = env;
    g->goal[0] = g->goal[1] = 0; /* no goal yet: every floor cell is free */
    random_floor(g, -1, g->goal);
    for (int a = 0; a < g->agents; a++)
        random_floor(g, a, g->pos[a]);
    g->steps = 0;
    g->success = 0;
    observe(g, o);
}

static int gw_step(void *env, const ro_actions_t *act, const ro_obs_out_t *o, ro_step_t *out)
{
    grid_t *g = env;
    int reached = 0;
    for (int a = 0; a < g->agents; a++) {
        int m = act->discrete[a];
        if (m < 0 || m >= ACTIONS)
            return -EINVAL;
        int r = g->pos[a][0] + moves[m][0], c = g->pos[a][1] + moves[m][1];
        if (room[r][c] == '#')
            return -EINVAL; /* a masked action: the runtime must never send one */
        g->pos[a][0] = r;
        g->pos[a][1] = c;
        reached |= r == g->goal[0] && c == g->goal[1];
    }
    g->steps++;
    g->success = reached;
    for (int a = 0; a < g->agents; a++)
        out[a] = (ro_step_t){.reward = (reached ? 1.0f : 0.0f) - STEP_COST,
                             .terminated = (uint8_t)reached};
    observe(g, o);
    return 0;
}

static void gw_metrics(void *env, float *values)
{
    const grid_t *g = env;
    values[0] = (float)g->success;
    values[1] = (float)g->steps;
}

static void gw_destroy(void *env)
{
    free(env);
}

/* Env state (rollout/env.h "Env state"): the whole grid_t, host order.
 * The positions index the room, so a loaded state must keep them on floor
 * cells. */
static size_t gw_state_size(void *env)
{
    (void)env;
    return sizeof(grid_t);
}

static int gw_save_state(void *env, void *buf, size_t len)
{
    if (len != sizeof(grid_t))
        return -EINVAL;
    memcpy(buf, env, sizeof(grid_t));
    return 0;
}

/* on_floor tells whether (r, c) is a floor cell of the room. */
static int on_floor(const int p[2])
{
    return p[0] >= 0 && p[0] < SIDE && p[1] >= 0 && p[1] < SIDE && room[p[0]][p[1]] == '.';
}

static int gw_load_state(void *env, const void *buf, size_t len)
{
    grid_t s;
    if (len != sizeof s)
        return -EINVAL;
    memcpy(&s, buf, sizeof s);
    if (!on_floor(s.goal) || !on_floor(s.pos[0]) || !on_floor(s.pos[1]))
        return -EINVAL;
    memcpy(env, &s, sizeof s);
    return 0;
}

static const ro_env2_vtable_t vtable = {
    .abi_version = RO_ENV_ABI2_VERSION,
    .size = sizeof(ro_env2_vtable_t),
    .name = "gridworld",
    .arg_keys = arg_keys,
    .max_episode_steps = 50,
    .create = gw_create,
    .spaces = gw_spaces,
    .reset = gw_reset,
    .step = gw_step,
    .destroy = gw_destroy,
    .metric_names = metric_names,
    .episode_metrics = gw_metrics,
    .state_size = gw_state_size,
    .save_state = gw_save_state,
    .load_state = gw_load_state,
};

const ro_env2_vtable_t *ro_env2_plugin(void);

const ro_env2_vtable_t *ro_env2_plugin(void)
{
    return &vtable;
}
