/* lane_gather.c: what the Lane's recv() hands out: the next batch's rows
 * copied out of the node's memory into new arrays, the episodes they end,
 * and infos. */
#include "lane.h"

#include <math.h>
#include <string.h>

/* The infos dict of recv() (vecenv_async.py's _transitions): o holds the
 * arrays ro__hp_lane_gather made. with_final: the same-step keys
 * final_obs, _final_obs and has_final_obs (NEXT_STEP has none). NULL on
 * error. */
static PyObject *lane_infos(PyObject **o, int with_ids, int with_final)
{
    /* The keys, made once (interned, never freed: the module lives as long
     * as the interpreter), and which of o each maps to. */
    static const char *const names[] = {"env_id",         "final_obs",        "_final_obs",
                                        "has_final_obs",  "_rollout_episode", "episode_return",
                                        "episode_length", "episode_start",    "step"};
    static const int which[] = {4, 5, 6, 6, 11, 9, 10, 7, 8};
    static PyObject *keys[9], *k_episode, *k_r, *k_l;
    enum { NKEYS = sizeof names / sizeof *names };
    if (!k_l) {
        for (int i = 0; i < NKEYS; i++) {
            if (!keys[i] && !(keys[i] = PyUnicode_InternFromString(names[i])))
                return NULL;
        }
        if ((!k_episode && !(k_episode = PyUnicode_InternFromString("rollout_episode"))) ||
            (!k_r && !(k_r = PyUnicode_InternFromString("r"))) ||
            !(k_l = PyUnicode_InternFromString("l")))
            return NULL;
    }
    PyObject *ep = PyDict_New(), *infos = PyDict_New();
    int bad = !ep || !infos || PyDict_SetItem(ep, k_r, o[9]) < 0 ||
              PyDict_SetItem(ep, k_l, o[10]) < 0 || PyDict_SetItem(infos, k_episode, ep) < 0;
    for (int i = with_ids ? 0 : 1; !bad && i < NKEYS; i++) { /* keys[0]: env_id */
        if (with_final || (which[i] != 5 && which[i] != 6))
            bad = PyDict_SetItem(infos, keys[i], o[which[i]]) < 0;
    }
    Py_XDECREF(ep);
    if (bad) {
        Py_XDECREF(infos);
        return NULL;
    }
    return infos;
}

/* The returns (float) and lengths (int) of the k rows' episodes counted
 * (ended of them) as two lists, in row order: what VecEnv appends to
 * episode_returns and episode_lengths. */
static PyObject *lane_ended(npy_intp k, npy_intp ended, const npy_bool *counted, const double *ret,
                            const int64_t *len)
{
    PyObject *r = PyList_New(ended), *l = PyList_New(ended);
    if (!r || !l)
        goto fail;
    for (npy_intp i = 0, j = 0; i < k; i++) {
        if (!counted[i])
            continue;
        PyObject *x = PyFloat_FromDouble(ret[i]), *y = PyLong_FromLongLong(len[i]);
        if (!x || !y) {
            Py_XDECREF(x);
            Py_XDECREF(y);
            goto fail;
        }
        PyList_SET_ITEM(r, j, x);
        PyList_SET_ITEM(l, j, y);
        j++;
    }
    return Py_BuildValue("(NN)", r, l);
fail:
    Py_XDECREF(r);
    Py_XDECREF(l);
    return NULL;
}

/* The `want` READY envs next in the ready queue, taken: (obs, reward,
 * terminated, truncated, infos, stepped, ended) as recv() returns the
 * first five (vecenv_lane.py); stepped counts the transitions, ended is
 * None or the (returns, lengths) lists of the episodes counted. Rows are
 * in arrival order, with infos["env_id"]; `ordered` (want is every env,
 * each READY once: step()) puts env e's in row e, without env_id.
 * NEXT_STEP (L->hold, lane.h): a held env's row is its reset step (no
 * transition), an ended episode's row its last observation (the node's
 * final one), and each env's mark is set from its flags; no final_obs. */
PyObject *ro__hp_lane_gather(Lane *L, npy_intp want, int ordered)
{
    npy_intp k = want, d = L->d;
    npy_intp dims[NPY_MAXDIMS];
    memcpy(dims, L->obs_dims, sizeof dims);
    dims[0] = k;
    PyObject *o[12] = {0};
    o[0] = PyArray_SimpleNew(L->obs_nd, dims, NPY_FLOAT32); /* obs */
    o[1] = PyArray_SimpleNew(1, &k, NPY_FLOAT32);           /* reward */
    o[2] = PyArray_SimpleNew(1, &k, NPY_BOOL);              /* terminated */
    o[3] = PyArray_SimpleNew(1, &k, NPY_BOOL);              /* truncated */
    o[4] = PyArray_SimpleNew(1, &k, NPY_INT64);             /* env_id */
    int next = L->hold != NULL;
    /* final obs (NEXT_STEP: none; o[5] then a placeholder, never handed out) */
    o[5] = next ? Py_NewRef(Py_None) : PyArray_SimpleNew(L->obs_nd, dims, NPY_FLOAT32);
    o[6] = PyArray_SimpleNew(1, &k, NPY_BOOL);    /* has_final */
    o[7] = PyArray_SimpleNew(1, &k, NPY_BOOL);    /* episode_start */
    o[8] = PyArray_SimpleNew(1, &k, NPY_UINT64);  /* step */
    o[9] = PyArray_SimpleNew(1, &k, NPY_FLOAT64); /* episode return */
    o[10] = PyArray_SimpleNew(1, &k, NPY_INT64);  /* episode length */
    o[11] = PyArray_SimpleNew(1, &k, NPY_BOOL);   /* counted */
    for (int i = 0; i < 12; i++) {
        if (!o[i]) {
            for (int j = 0; j < 12; j++)
                Py_XDECREF(o[j]);
            return NULL;
        }
    }
#define COL(i, T) ((T *)PyArray_DATA((PyArrayObject *)o[i]))
    /* Each a fresh array of its own: restrict lets the passes vectorise. */
    float *restrict obs = COL(0, float), *restrict reward = COL(1, float);
    float *restrict fin = next ? NULL : COL(5, float);
    npy_bool *restrict term = COL(2, npy_bool), *restrict trunc = COL(3, npy_bool);
    npy_bool *restrict hasf = COL(6, npy_bool), *restrict start = COL(7, npy_bool);
    npy_bool *restrict counted = COL(11, npy_bool);
    int64_t *restrict ids = COL(4, int64_t), *restrict out_len = COL(10, int64_t);
    uint64_t *restrict step = COL(8, uint64_t);
    double *restrict out_ret = COL(9, double);
#undef COL
    npy_intp got = 0, stepped = 0, ended = 0;
    size_t row = (size_t)d * sizeof(float);
    while (got < k) {
        uint32_t *run = L->ready[L->rhead];
        npy_intp first = run[0], take = run[1] < (uint32_t)(k - got) ? run[1] : k - got;
        npy_intp at = ordered ? first : got; /* where its rows go */
        memcpy(obs + at * d, L->m_obs + first * d, row * (size_t)take);
        memcpy(reward + at, L->m_reward + first, (size_t)take * sizeof(float));
        memcpy(step + at, L->m_step + first, (size_t)take * sizeof(uint64_t));
        memset(L->state + first, HANDED, (size_t)take);
        /* Branch-free passes (a batch is a thousand rows, and this runs
         * cold after the user's policy): the few final observations are
         * copied over the NaN fill afterwards. */
        if (!next) {
            for (npy_intp c = 0; c < take * d; c++)
                fin[at * d + c] = NAN;
        }
        /* The flags, each byte read once (the node may rewrite it
         * meanwhile): into hasf first, then decoded from there. */
        memcpy(hasf + at, L->m_flags + first, (size_t)take);
        for (npy_intp j = 0; j < take; j++) {
            npy_intp i = at + j;
            uint8_t f = hasf[i];
            ids[i] = first + j;
            term[i] = (f & RO_HP_TERMINATED) != 0;
            trunc[i] = (f & RO_HP_TRUNCATED) != 0;
            start[i] = (f & RO_HP_EPISODE_START) != 0;
            hasf[i] = (f & RO_HP_HAS_FINAL) != 0;
        }
        /* Episodes, by episodes()'s rule (hotpath.h): step 0 is an env's
         * first observation, no transition. */
        double *restrict ep_ret = L->ep_ret + first;
        int64_t *restrict ep_len = L->ep_len + first;
        npy_bool *restrict held = next ? L->hold + first : NULL;
        for (npy_intp j = 0; j < take; j++) {
            npy_intp i = at + j;
            /* NEXT_STEP: a held env's transition is its reset step. */
            int st = (step[i] != 0) & !(next && held[j]);
            int count = ro__hp_episode_row(&ep_ret[j], &ep_len[j], reward[i], st, term[i], trunc[i],
                                           hasf[i], &out_ret[i], &out_len[i]);
            counted[i] = (npy_bool)count;
            stepped += st;
            ended += count;
            if (next) /* its next answer holds it for its reset step */
                held[j] = term[i] | trunc[i];
        }
        for (npy_intp j = 0; j < take; j++) {
            if (!hasf[at + j])
                continue;
            if (!next) /* the few final observations over the NaN fill */
                memcpy(fin + (at + j) * d, L->m_final + (first + j) * d, row);
            else if (term[at + j] | trunc[at + j]) /* the episode's last observation */
                memcpy(obs + (at + j) * d, L->m_final + (first + j) * d, row);
        }
        got += take;
        if ((uint32_t)take == run[1]) {
            L->rhead = (L->rhead + 1) % L->n;
            L->rlen--;
        } else {
            run[0] += (uint32_t)take;
            run[1] -= (uint32_t)take;
        }
    }
    L->nready -= k;
    PyObject *infos = lane_infos(o, !ordered, !next);
    PyObject *eps = !infos  ? NULL
                    : ended ? lane_ended(k, ended, counted, out_ret, out_len)
                            : Py_NewRef(Py_None);
    PyObject *t =
        eps ? Py_BuildValue("(OOOONnN)", o[0], o[1], o[2], o[3], infos, (Py_ssize_t)stepped, eps)
            : NULL;
    if (!eps)
        Py_XDECREF(infos);
    for (int j = 0; j < 12; j++)
        Py_DECREF(o[j]);
    return t;
}