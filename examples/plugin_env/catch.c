/*
 * An env ABI 2 example plugin: "catch" on 84x84 uint8 pixels, built against
 * the installed <rollout/env.h> only.
 *
 *     gcc -O2 -shared -fPIC -I<prefix>/include catch.c -o libcatch.so
 *     rollout-node --env ./libcatch.so --policy mlp
 *
 * A ball (4x4 pixels) falls from a random column at the top, 4 pixels a
 * step; a paddle (12x3 pixels) moves along the bottom. When the ball
 * reaches the paddle's row the episode terminates: +1 if the paddle is
 * under it, -1 if not. Pixels are 0 (background) or 255 (ball, paddle), in
 * one uint8 tensor "pixels" [1, 84, 84]: a quarter of what float32 takes.
 *
 * The action is Discrete(3) (left, stay, right) by default; with the env
 * arg action=multidiscrete it is MultiDiscrete([3, 2]): the direction and
 * a speed (1 or 2 moves), to exercise composite heads. Metric: "caught".
 */
#include <rollout/env.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIDE 84
#define BALL 4
#define FALL 4 /* pixels per step */
#define PADDLE_W 12
#define PADDLE_H 3
#define PADDLE_STEP 4
#define PADDLE_ROW (SIDE - PADDLE_H)

typedef struct catch_env {
    uint64_t rng;
    int multi; /* MultiDiscrete([3, 2]) actions */
    int ball_r, ball_c, paddle_c;
    int caught;
} catch_t;

static const char *const arg_keys[] = {
    "action", "discrete (default): Discrete(3); multidiscrete: MultiDiscrete([3, 2])", NULL};
static const char *const metric_names[] = {"caught", NULL};
static const uint32_t nvec[2] = {3, 2};

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int ct_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                     size_t errlen)
{
    int multi = 0;
    for (size_t i = 0; i < nargs; i++) {
        if (strcmp(args[i].value, "multidiscrete") == 0) {
            multi = 1;
        } else if (strcmp(args[i].value, "discrete") != 0) {
            snprintf(err, errlen, "catch: action=%s; expected discrete or multidiscrete",
                     args[i].value);
            return -EINVAL;
        }
    }
    catch_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "catch: out of memory");
        return -ENOMEM;
    }
    g->rng = seed;
    g->multi = multi;
    *out = g;
    return 0;
}

static void ct_spaces(void *env, ro_env_spaces_t *sp)
{
    const catch_t *g = env;
    sp->num_agents = 1;
    sp->num_obs = 1;
    sp->obs[0] = (ro_tensor_space_t){
        .name = "pixels", .dtype = RO_DTYPE_UINT8, .ndim = 3, .shape = {1, SIDE, SIDE}};
    sp->num_parts = 1;
    if (g->multi)
        sp->act[0] = (ro_action_part_t){.kind = RO_SPACE_MULTI_DISCRETE, .n = 2, .nvec = nvec};
    else
        sp->act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
}

static void fill(uint8_t *px, int r0, int c0, int h, int w)
{
    for (int r = r0; r < r0 + h && r < SIDE; r++)
        memset(px + r * SIDE + c0, 255, (size_t)w);
}

static void render(const catch_t *g, const ro_obs_out_t *o)
{
    uint8_t *px = o->tensors[0];
    memset(px, 0, SIDE * SIDE);
    fill(px, g->ball_r, g->ball_c, BALL, BALL);
    fill(px, PADDLE_ROW, g->paddle_c, PADDLE_H, PADDLE_W);
}

static void ct_reset(void *env, const ro_obs_out_t *o)
{
    catch_t *g = env;
    g->ball_r = 0;
    g->ball_c = (int)(next_u64(&g->rng) % (SIDE - BALL + 1));
    g->paddle_c = (SIDE - PADDLE_W) / 2;
    g->caught = 0;
    render(g, o);
}

static int ct_step(void *env, const ro_actions_t *act, const ro_obs_out_t *o, ro_step_t *out)
{
    catch_t *g = env;
    int dir = act->discrete[0], times = g->multi ? 1 + act->discrete[1] : 1;
    if (dir < 0 || dir > 2 || times < 1 || times > 2)
        return -EINVAL;
    g->paddle_c += (dir - 1) * PADDLE_STEP * times;
    g->paddle_c = g->paddle_c < 0                 ? 0
                  : g->paddle_c > SIDE - PADDLE_W ? SIDE - PADDLE_W
                                                  : g->paddle_c;
    g->ball_r += FALL;
    *out = (ro_step_t){0};
    if (g->ball_r + BALL >= PADDLE_ROW) {
        g->ball_r = PADDLE_ROW - BALL;
        g->caught = g->ball_c + BALL > g->paddle_c && g->ball_c < g->paddle_c + PADDLE_W;
        out->reward = g->caught ? 1.0f : -1.0f;
        out->terminated = 1;
    }
    render(g, o);
    return 0;
}

static void ct_metrics(void *env, float *values)
{
    values[0] = (float)((const catch_t *)env)->caught;
}

static void ct_destroy(void *env)
{
    free(env);
}

/* Env state (rollout/env.h "Env state"): the RNG, the ball, the paddle
 * and the outcome, host order (the action kind comes from the args). The
 * positions index the picture, so a loaded state must keep them on it. */
typedef struct ct_state {
    uint64_t rng;
    int32_t ball_r, ball_c, paddle_c, caught;
} ct_state_t;

static size_t ct_state_size(void *env)
{
    (void)env;
    return sizeof(ct_state_t);
}

static int ct_save_state(void *env, void *buf, size_t len)
{
    const catch_t *g = env;
    if (len != sizeof(ct_state_t))
        return -EINVAL;
    ct_state_t s = {.rng = g->rng,
                    .ball_r = g->ball_r,
                    .ball_c = g->ball_c,
                    .paddle_c = g->paddle_c,
                    .caught = g->caught};
    memcpy(buf, &s, sizeof s);
    return 0;
}

static int ct_load_state(void *env, const void *buf, size_t len)
{
    catch_t *g = env;
    ct_state_t s;
    if (len != sizeof s)
        return -EINVAL;
    memcpy(&s, buf, sizeof s);
    if (s.ball_r < 0 || s.ball_r > PADDLE_ROW - BALL || s.ball_c < 0 || s.ball_c > SIDE - BALL ||
        s.paddle_c < 0 || s.paddle_c > SIDE - PADDLE_W || (s.caught != 0 && s.caught != 1))
        return -EINVAL;
    g->rng = s.rng;
    g->ball_r = s.ball_r;
    g->ball_c = s.ball_c;
    g->paddle_c = s.paddle_c;
    g->caught = s.caught;
    return 0;
}

static const ro_env2_vtable_t vtable = {
    .abi_version = RO_ENV_ABI2_VERSION,
    .size = sizeof(ro_env2_vtable_t),
    .name = "catch",
    .arg_keys = arg_keys,
    .max_episode_steps = 0,
    .create = ct_create,
    .spaces = ct_spaces,
    .reset = ct_reset,
    .step = ct_step,
    .destroy = ct_destroy,
    .metric_names = metric_names,
    .episode_metrics = ct_metrics,
    .state_size = ct_state_size,
    .save_state = ct_save_state,
    .load_state = ct_load_state,
};

const ro_env2_vtable_t *ro_env2_plugin(void);

const ro_env2_vtable_t *ro_env2_plugin(void)
{
    return &vtable;
}
