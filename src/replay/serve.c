#include "replay/serve.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envs/registry.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "trajectory/file.h"
#include "wire/frame.h"

/* Entry flags in TransitionBatch (docs/replay.md). */
#define F_TERMINATED 1u
#define F_TRUNCATED 2u
#define F_FAILED 4u
#define F_RESET 8u

/* The server's state: one learner, served synchronously. */
typedef struct serve {
    int fd;
    ro_frame_reader_t rd;
    FILE *log;
    uint32_t num_envs, obs_dim, act_dim;
    bool discrete;
    uint64_t seq;
    /* Per env: the learner's answer to its last observation, to compare
     * with the action the recording shows for the env's next step. */
    bool *answered;
    int32_t *ans_i;
    float *ans_f;
    uint64_t *steps;
    uint64_t compared, mismatches, frames, rows;
    char first_mismatch[200];
} serve_t;

static int send_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return RO_EIO;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int send_frame(serve_t *s, const ro_frame_t *f)
{
    uint8_t *buf;
    size_t len;
    if (ro__frame_encode(f, &buf, &len) != 0)
        return RO_ENOMEM;
    int rc = send_all(s->fd, buf, len);
    free(buf);
    return rc;
}

static void send_error(serve_t *s, const char *msg)
{
    Rollout__V1__Error e = ROLLOUT__V1__ERROR__INIT;
    e.code = (uint32_t)EPROTO;
    e.message = (char *)msg;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ERROR;
    f.error = &e;
    send_frame(s, &f);
}

/* The next frame from the learner, blocking; NULL on EOF or error (logged). */
static ro_frame_t *recv_frame(serve_t *s)
{
    for (;;) {
        ro_frame_t *f;
        char err[256];
        int rc = ro__frame_reader_next(&s->rd, &f, err, sizeof err);
        if (rc == 1)
            return f;
        if (rc < 0) {
            fprintf(s->log, "rollout-replay: learner: %s\n", err);
            send_error(s, err);
            return NULL;
        }
        uint8_t buf[65536];
        ssize_t k = recv(s->fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            fprintf(s->log, "rollout-replay: learner disconnected\n");
            return NULL;
        }
        if (ro__frame_reader_feed(&s->rd, buf, (size_t)k) != 0)
            return NULL;
    }
}

static int listen_on(const char *addr, FILE *log)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host) {
        fprintf(log, "rollout-replay: --serve '%s': expected HOST:PORT\n", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
        fprintf(log, "rollout-replay: --serve '%s': expected a numeric address and port\n", addr);
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1) != 0) {
        fprintf(log, "rollout-replay: --serve '%s': %s\n", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    char h[64] = "?";
    int port = 0;
    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, NULL, 0, NI_NUMERICHOST);
    port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                   : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    fprintf(log, "rollout-replay: serving on %s:%d\n", h, port);
    fflush(log);
    return fd;
}

/* Spaces of the recorded env, from one instance made as the node made it. */
static int env_spaces(const Rollout__V1__TrajectoryHeader *h, const char *plugin,
                      ro_env_kind_t *kind, void **env, ro_space_t *os, ro_space_t *as, FILE *log)
{
    char err[256];
    const char *spec = plugin ? plugin : h->env_spec;
    if (ro__env_open(kind, spec, err, sizeof err) != 0) {
        fprintf(log, "rollout-replay: cannot load env '%s': %s\n", spec, err);
        return -1;
    }
    ro_env_arg_t in[RO_MAX_ENV_ARGS], args[RO_MAX_ENV_ARGS];
    size_t nin = h->n_env_args < RO_MAX_ENV_ARGS ? h->n_env_args : RO_MAX_ENV_ARGS, nargs;
    for (size_t i = 0; i < nin; i++) {
        in[i].key = h->env_args[i]->key;
        in[i].value = h->env_args[i]->value;
    }
    uint32_t ignored;
    if (ro__env_check_args(kind->vt, in, nin, args, &nargs, &ignored, err, sizeof err) != 0 ||
        kind->vt->create(env, args, nargs, ro__seed_mix(h->seed, 0, RO_STREAM_ENV), err,
                         sizeof err) != 0) {
        fprintf(log, "rollout-replay: env '%s': %s\n", spec, err);
        ro__env_close(kind);
        return -1;
    }
    kind->vt->spaces(*env, os, as);
    return 0;
}

static int handshake(serve_t *s, const Rollout__V1__TrajectoryHeader *h, const ro_space_t *os,
                     const ro_space_t *as)
{
    ro_frame_t *f = recv_frame(s);
    if (!f)
        return 1;
    bool ok = f->body_case == ROLLOUT__V1__FRAME__BODY_HELLO && f->hello &&
              f->hello->protocol_version == RO_PROTOCOL_VERSION && f->hello->role &&
              strcmp(f->hello->role, "learner") == 0;
    ro__frame_free(f);
    if (!ok) {
        fprintf(s->log, "rollout-replay: expected a learner's hello (protocol version %u)\n",
                RO_PROTOCOL_VERSION);
        send_error(s, "expected a learner's hello with protocol version 1");
        return 1;
    }
    Rollout__V1__Space o = ROLLOUT__V1__SPACE__INIT, a = ROLLOUT__V1__SPACE__INIT;
    uint32_t oshape[RO_SPACE_MAX_DIMS], ashape[RO_SPACE_MAX_DIMS];
    ro__wire_space(&o, os, oshape);
    ro__wire_space(&a, as, ashape);
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    spec.env = h->env;
    spec.observation = &o;
    spec.action = &a;
    spec.num_envs = h->num_envs;
    spec.max_episode_steps = h->max_episode_steps;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    w.protocol_version = RO_PROTOCOL_VERSION;
    w.node_id = ro__seed_mix(h->seed, h->start_time_unix_ns, 99);
    w.spec = &spec;
    w.seed = h->seed;
    w.max_frame = RO_WIRE_DEFAULT_MAX_FRAME;
    ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
    out.body_case = ROLLOUT__V1__FRAME__BODY_WELCOME;
    out.welcome = &w;
    return send_frame(s, &out) == 0 ? 0 : 1;
}

/* Compare the learner's last answer for env e with the recorded action of
 * e's next step (entry k of b). */
static void compare(serve_t *s, const Rollout__V1__TransitionBatch *b, size_t k, uint32_t e)
{
    if (!s->answered[e])
        return;
    s->answered[e] = false;
    s->compared++;
    bool same;
    char rec[64], got[64];
    if (s->discrete) {
        same = b->action[k] == s->ans_i[e];
        snprintf(rec, sizeof rec, "%d", b->action[k]);
        snprintf(got, sizeof got, "%d", s->ans_i[e]);
    } else {
        same = memcmp(b->action_box + k * s->act_dim, s->ans_f + (size_t)e * s->act_dim,
                      s->act_dim * sizeof(float)) == 0;
        snprintf(rec, sizeof rec, "%g...", (double)b->action_box[k * s->act_dim]);
        snprintf(got, sizeof got, "%g...", (double)s->ans_f[(size_t)e * s->act_dim]);
    }
    if (!same && s->mismatches++ == 0)
        snprintf(s->first_mismatch, sizeof s->first_mismatch,
                 "env %u, episode %llu, step %u: recorded %s, learner %s", e,
                 (unsigned long long)b->episode[k], b->step[k], rec, got);
}

/* One recorded batch: compare the actions it shows with the learner's, then
 * deliver its observations as one Observations frame and collect the
 * answer. Returns 0, or 1 if the learner failed. */
static int serve_batch(serve_t *s, const Rollout__V1__TransitionBatch *b)
{
    size_t n = b->n_env, od = s->obs_dim;
    /* Rows: one per env that stepped or was reset in this record. */
    uint32_t *env = calloc(n, sizeof *env);
    uint64_t *step = calloc(n, sizeof *step);
    float *obs = calloc(n * od + 1, sizeof *obs), *fin = calloc(n * od + 1, sizeof *fin);
    float *rew = calloc(n, sizeof *rew);
    protobuf_c_boolean *term = calloc(n, sizeof *term), *trunc = calloc(n, sizeof *trunc),
                       *start = calloc(n, sizeof *start);
    uint32_t *fidx = calloc(n, sizeof *fidx);
    int rc = 1;
    if (!env || !step || !obs || !fin || !rew || !term || !trunc || !start || !fidx)
        goto out;
    size_t rows = 0, nfin = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t e = b->env[k], fl = b->flags[k];
        const float *o = b->obs + k * od;
        if (!(fl & F_RESET)) { /* a step: its action answers e's previous observation */
            compare(s, b, k, e);
            env[rows] = e;
            rew[rows] = b->reward[k];
            term[rows] = (fl & F_TERMINATED) != 0;
            trunc[rows] = (fl & (F_TRUNCATED | F_FAILED)) != 0;
            memcpy(obs + rows * od, o, od * sizeof(float));
            s->steps[e]++;
            step[rows] = s->steps[e];
            rows++;
        } else if (rows > 0 && env[rows - 1] == e) { /* the reset after e's last step */
            if (!(b->flags[k - 1] & F_FAILED)) {
                memcpy(fin + nfin * od, obs + (rows - 1) * od, od * sizeof(float));
                fidx[nfin++] = (uint32_t)(rows - 1);
            }
            memcpy(obs + (rows - 1) * od, o, od * sizeof(float));
            start[rows - 1] = 1;
        } else { /* a first observation (start of the run) */
            env[rows] = e;
            start[rows] = 1;
            memcpy(obs + rows * od, o, od * sizeof(float));
            step[rows] = s->steps[e];
            rows++;
        }
    }
    if (rows == 0) {
        rc = 0;
        goto out;
    }
    Rollout__V1__Observations ob = ROLLOUT__V1__OBSERVATIONS__INIT;
    ob.seq = ++s->seq;
    ob.n_env = ob.n_step = ob.n_reward = ob.n_terminated = ob.n_truncated = ob.n_episode_start =
        rows;
    ob.env = env;
    ob.step = step;
    ob.reward = rew;
    ob.terminated = term;
    ob.truncated = trunc;
    ob.episode_start = start;
    ob.n_obs = rows * od;
    ob.obs = obs;
    ob.n_final_index = nfin;
    ob.final_index = fidx;
    ob.n_final_obs = nfin * od;
    ob.final_obs = fin;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &ob;
    if (send_frame(s, &f) != 0)
        goto out;
    s->frames++;
    s->rows += rows;
    ro_frame_t *a = recv_frame(s);
    if (!a)
        goto out;
    const Rollout__V1__Actions *ac = a->actions;
    size_t want = rows * (s->discrete ? 1 : s->act_dim);
    if (a->body_case != ROLLOUT__V1__FRAME__BODY_ACTIONS || ac->seq != ob.seq ||
        (s->discrete ? ac->n_discrete : ac->n_box) != want) {
        fprintf(s->log, "rollout-replay: learner: expected %zu actions for seq %llu, got %s\n",
                want, (unsigned long long)ob.seq, ro__frame_kind(a));
        send_error(s, "expected the actions for the last observations");
        ro__frame_free(a);
        goto out;
    }
    for (size_t r = 0; r < rows; r++) {
        uint32_t e = env[r];
        s->answered[e] = true;
        if (s->discrete)
            s->ans_i[e] = ac->discrete[r];
        else
            memcpy(s->ans_f + (size_t)e * s->act_dim, ac->box + r * s->act_dim,
                   s->act_dim * sizeof(float));
    }
    ro__frame_free(a);
    rc = 0;
out:
    free(env);
    free(step);
    free(obs);
    free(fin);
    free(rew);
    free(term);
    free(trunc);
    free(start);
    free(fidx);
    return rc;
}

int ro__replay_serve(const char *addr, const ro_serve_file_t *files, size_t nfiles,
                     const char *plugin, FILE *log)
{
    ro_traj_reader_t rd;
    char err[256];
    if (ro__traj_reader_open(&rd, files[0].data, files[0].len, true, err, sizeof err) != 0) {
        fprintf(log, "rollout-replay: %s: %s\n", files[0].name, err);
        return 2;
    }
    ro_env_kind_t kind;
    void *env = NULL;
    ro_space_t os, as;
    if (env_spaces(rd.hdr, plugin, &kind, &env, &os, &as, log) != 0) {
        ro__traj_reader_close(&rd);
        return 2;
    }
    serve_t s = {.log = log,
                 .num_envs = rd.hdr->num_envs,
                 .obs_dim = rd.hdr->obs_dim,
                 .act_dim = rd.hdr->action_dim,
                 .discrete = as.kind == RO_SPACE_DISCRETE};
    s.answered = calloc(s.num_envs, sizeof *s.answered);
    s.ans_i = calloc(s.num_envs, sizeof *s.ans_i);
    s.ans_f = calloc((size_t)s.num_envs * s.act_dim, sizeof *s.ans_f);
    s.steps = calloc(s.num_envs, sizeof *s.steps);
    int lfd = listen_on(addr, log);
    int status = 2;
    if (!s.answered || !s.ans_i || !s.ans_f || !s.steps || lfd < 0)
        goto done;
    s.fd = accept(lfd, NULL, NULL);
    close(lfd);
    if (s.fd < 0 || ro__frame_reader_init(&s.rd, RO_WIRE_DEFAULT_MAX_FRAME) != 0)
        goto done;
    int one = 1;
    setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    status = 1;
    if (handshake(&s, rd.hdr, &os, &as) != 0)
        goto done_conn;
    for (size_t i = 0; i < nfiles; i++) {
        if (i > 0) {
            ro__traj_reader_close(&rd);
            if (ro__traj_reader_open(&rd, files[i].data, files[i].len, true, err, sizeof err)) {
                fprintf(log, "rollout-replay: %s: %s\n", files[i].name, err);
                goto done_conn;
            }
        }
        for (;;) {
            Rollout__V1__TransitionBatch *b;
            ro_traj_event_t ev = ro__traj_reader_next(&rd, &b);
            if (ev == RO_TRAJ_EOF)
                break;
            if (ev != RO_TRAJ_BATCH) {
                fprintf(log, "rollout-replay: %s: %s\n", files[i].name, rd.msg);
                continue;
            }
            int rc = serve_batch(&s, b);
            ro__traj_batch_free(b);
            if (rc)
                goto done_conn;
        }
    }
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    g.reason = "end of the recording";
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &g;
    send_frame(&s, &f);
    status = 0;
done_conn:
    fprintf(log,
            "rollout-replay: served %llu observations in %llu frames; compared %llu actions with "
            "the recording: %llu mismatch(es)%s%s\n",
            (unsigned long long)s.rows, (unsigned long long)s.frames,
            (unsigned long long)s.compared, (unsigned long long)s.mismatches,
            s.mismatches ? "; first: " : "", s.first_mismatch);
    ro__frame_reader_free(&s.rd);
    if (s.fd >= 0)
        close(s.fd);
done:
    free(s.answered);
    free(s.ans_i);
    free(s.ans_f);
    free(s.steps);
    kind.vt->destroy(env);
    ro__env_close(&kind);
    ro__traj_reader_close(&rd);
    return status;
}
