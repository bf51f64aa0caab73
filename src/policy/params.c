#include "policy/params.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/pb_alloc.h"
#include "wire/varint.h"
#include "rollout.pb-c.h"

int ro__policy_params_alloc(ro_policy_params_t *p)
{
    /* Dimensions come from a validated file or spec; the overflow checks
     * only keep a bug from turning into a short allocation. */
    if (!p->composite)
        p->nlog_std = p->action_kind == RO_SPACE_BOX ? p->action_dim : 0;
    size_t total = p->nlog_std;
    for (uint32_t l = 0; l < p->nlayers; l++) {
        const ro_policy_layer_t *L = &p->layers[l];
        /* a cell: [G*H x in] and [G*H x H] weights, two [G*H] biases */
        size_t in = L->in + (L->cell ? L->out + 1 : 0), out = ro__policy_layer_rows(L);
        if (out > (SIZE_MAX / sizeof(float) - total) / (in + 1))
            return RO_ENOMEM;
        total += out * in + out;
    }
    float *mem = malloc((total ? total : 1) * sizeof(float));
    if (!mem)
        return RO_ENOMEM;
    p->mem = mem;
    for (uint32_t l = 0; l < p->nlayers; l++) {
        ro_policy_layer_t *L = &p->layers[l];
        const size_t rows = ro__policy_layer_rows(L);
        L->weight = mem;
        mem += rows * L->in;
        L->bias = mem;
        mem += rows;
        if (L->cell) {
            L->weight_hh = mem;
            mem += rows * L->out;
            L->bias_hh = mem;
            mem += rows;
        }
    }
    p->log_std = p->nlog_std ? mem : NULL;
    return 0;
}

void ro__policy_params_free(ro_policy_params_t *p)
{
    if (!p)
        return;
    free(p->mem);
    p->mem = NULL;
    free(p->layout);
    p->layout = NULL;
    p->layout_len = 0;
    for (uint32_t l = 0; l < p->nlayers; l++) {
        p->layers[l].weight = NULL;
        p->layers[l].bias = NULL;
        p->layers[l].weight_hh = NULL;
        p->layers[l].bias_hh = NULL;
    }
    p->log_std = NULL;
}

/* printable copies at most 32 characters of an untrusted string into out
 * for an error message, replacing anything but printable ASCII with '?'. */
static const char *printable(const char *s, char out[40])
{
    size_t i = 0;
    for (; s[i] && i < 32; i++)
        out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (s[i]) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = 0;
    return out;
}

/* check_finite fails on the first NaN or infinity of v[0..n). */
static int check_finite(const float *v, size_t n, const char *name, const char *field,
                        uint32_t layer, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            if (layer == UINT32_MAX)
                return ro__errorf(err, errlen, RO_EBADMSG,
                                  "%s: %s[%zu] is %g; values must be finite", name, field, i,
                                  (double)v[i]);
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layers[%u].%s[%zu] is %g; values must be finite", name, layer,
                              field, i, (double)v[i]);
        }
    return 0;
}

/* check_header validates the scalar fields of m into p. */
static int check_header(ro_policy_params_t *p, const Rollout__V1__PolicyParams *m, const char *name,
                        char *err, size_t errlen)
{
    char tmp[40];
    if (m->format_version < 1 || m->format_version > RO_POLICY_FORMAT_VERSION)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: format_version is %u; this reader knows format_version 1 to %d",
                          name, m->format_version, RO_POLICY_FORMAT_VERSION);
    if (m->format_version == 1 && m->layout)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layout is set but format_version is 1 (layout is format 2)", name);
    if (m->format_version == 2 && !m->layout) /* 3 (recurrent) carries one when it has a layout */
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: format_version is 2 but layout is missing",
                          name);
    const char *act = m->activation ? m->activation : "";
    if (strcmp(act, "tanh") == 0)
        p->activation = RO_ACT_TANH;
    else if (strcmp(act, "relu") == 0)
        p->activation = RO_ACT_RELU;
    else
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: activation is \"%s\"; expected \"tanh\" or \"relu\"", name,
                          printable(act, tmp));
    const char *kind = m->action_kind ? m->action_kind : "";
    if (strcmp(kind, "discrete") == 0)
        p->action_kind = RO_SPACE_DISCRETE;
    else if (strcmp(kind, "box") == 0)
        p->action_kind = RO_SPACE_BOX;
    else if (strcmp(kind, "composite") == 0 && m->format_version >= 2)
        p->action_kind = RO_SPACE_DISCRETE; /* the MLP sees one plain head */
    else
        return ro__errorf(err, errlen, RO_EBADMSG,
                          m->format_version >= 2
                              ? "%s: action_kind is \"%s\"; expected \"discrete\", \"box\" or "
                                "\"composite\""
                              : "%s: action_kind is \"%s\"; expected \"discrete\" or \"box\" "
                                "(\"composite\" is format_version 2)",
                          name, printable(kind, tmp));
    p->composite = strcmp(kind, "composite") == 0;
    if (m->obs_dim == 0)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: obs_dim is 0", name);
    if (m->action_dim == 0 || m->action_dim > RO_POLICY_MAX_WIDTH)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: action_dim is %u; expected 1..%u", name,
                          m->action_dim, RO_POLICY_MAX_WIDTH);
    if (m->n_layers == 0 || m->n_layers > RO_POLICY_MAX_HIDDEN + 1)
        return ro__errorf(
            err, errlen, RO_EBADMSG,
            "%s: has %zu layers; expected 1..%d (up to %d hidden layers, then the head)", name,
            m->n_layers, RO_POLICY_MAX_HIDDEN + 1, RO_POLICY_MAX_HIDDEN);
    if (m->format_version == 3 && m->n_layers < 2)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: format_version is 3 (a recurrent cell before the head) but it has "
                          "%zu layer",
                          name, m->n_layers);
    p->obs_dim = m->obs_dim;
    p->action_dim = m->action_dim;
    p->nlayers = (uint32_t)m->n_layers;
    p->version = m->version;
    return 0;
}

/* check_vector validates a bias-like tensor of layer l: shape [n], n values. */
static int check_vector(const Rollout__V1__Tensor *b, uint32_t n, const char *name, uint32_t l,
                        const char *field, char *err, size_t errlen)
{
    if (!b)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: layers[%u].%s is missing", name, l, field);
    if (b->n_shape != 1 || b->shape[0] != n)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u].%s must have shape [%u] (the layer's outputs)", name, l,
                          field, n);
    if (b->n_data != n)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u].%s has shape [%u] but %zu data values", name, l, field, n,
                          b->n_data);
    return 0;
}

/* check_cell reads layer l's kind into p (format 3: a recurrent cell of
 * 1..RO_CELL_MAX units, the layer before the head, its weight's rows a
 * multiple of the gates). */
static int check_cell(ro_policy_params_t *p, const Rollout__V1__PolicyParams *m, uint32_t l,
                      const char *name, char *err, size_t errlen)
{
    const Rollout__V1__Layer *L = m->layers[l];
    const char *kind = L->kind ? L->kind : "";
    char tmp[40];
    p->layers[l].cell = RO_CELL_NONE;
    if (*kind == '\0') {
        if (L->weight_hh || L->bias_hh)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layers[%u] has weight_hh or bias_hh but no kind (\"gru\" or "
                              "\"lstm\")",
                              name, l);
        if (m->format_version == 3 && l + 2 == p->nlayers)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: format_version is 3 but layers[%u] (before the head) is not a "
                              "recurrent cell",
                              name, l);
        return 0;
    }
    if (strcmp(kind, "gru") && strcmp(kind, "lstm"))
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u].kind is \"%s\"; expected \"gru\", \"lstm\" or none", name,
                          l, printable(kind, tmp));
    if (m->format_version < 3)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u] is a %s cell but format_version is %u (recurrent layers "
                          "are format 3)",
                          name, l, kind, m->format_version);
    if (l + 2 != p->nlayers)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u] is a %s cell; the cell must be the layer before the head",
                          name, l, kind);
    const ro_cell_t cell = kind[0] == 'g' ? RO_CELL_GRU : RO_CELL_LSTM;
    const uint32_t g = ro_cell_gates(cell), rows = L->weight->shape[0];
    if (rows % g || rows / g > RO_CELL_MAX)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u].weight has %u rows; a %s cell has %u x H, H in 1..%u",
                          name, l, rows, kind, g, RO_CELL_MAX);
    p->layers[l].cell = cell;
    return 0;
}

/* check_layer validates the shapes of layer l of m and sets p's dims. */
static int check_layer(ro_policy_params_t *p, const Rollout__V1__PolicyParams *m, uint32_t l,
                       const char *name, char *err, size_t errlen)
{
    const Rollout__V1__Layer *L = m->layers[l];
    const Rollout__V1__Tensor *w = L ? L->weight : NULL;
    const Rollout__V1__Tensor *b = L ? L->bias : NULL;
    const int head = l + 1 == p->nlayers;
    if (!w)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: layers[%u].weight is missing", name, l);
    if (w->n_shape != 2)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u].weight has %zu dimensions; expected 2 ([out, in])", name,
                          l, w->n_shape);
    uint32_t out = w->shape[0], in = w->shape[1];
    if (out == 0 || in == 0)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: layers[%u].weight has shape [%u,%u]", name,
                          l, out, in);
    int rc = check_cell(p, m, l, name, err, errlen);
    if (rc < 0)
        return rc;
    if ((uint64_t)out * in != w->n_data)
        return ro__errorf(
            err, errlen, RO_EBADMSG,
            "%s: layers[%u].weight has shape [%u,%u] (%llu values) but %zu data values", name, l,
            out, in, (unsigned long long)out * in, w->n_data);
    if (l == 0 && in != p->obs_dim)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[0].weight has shape [%u,%u] but obs_dim is %u", name, out, in,
                          p->obs_dim);
    if (l > 0 && in != p->layers[l - 1].out)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u].weight has shape [%u,%u] but layers[%u] outputs %u", name,
                          l, out, in, l - 1, p->layers[l - 1].out);
    out = p->layers[l].cell ? out / ro_cell_gates(p->layers[l].cell) : out; /* a cell: H */
    if (head && out != p->action_dim)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u] (the head) outputs %u but action_dim is %u", name, l, out,
                          p->action_dim);
    if (!head && out > RO_POLICY_MAX_WIDTH)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u] outputs %u; hidden layers are at most %u wide", name, l,
                          out, RO_POLICY_MAX_WIDTH);
    p->layers[l].in = in;
    p->layers[l].out = out;
    const uint32_t rows = (uint32_t)ro__policy_layer_rows(&p->layers[l]);
    if ((rc = check_vector(b, rows, name, l, "bias", err, errlen)) < 0)
        return rc;
    if (!p->layers[l].cell)
        return 0;
    const Rollout__V1__Tensor *wh = L->weight_hh;
    if (!wh || wh->n_shape != 2 || wh->shape[0] != rows || wh->shape[1] != out ||
        wh->n_data != (size_t)rows * out)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layers[%u].weight_hh must have shape [%u,%u] with as many values "
                          "(the cell's recurrent weights)",
                          name, l, rows, out);
    return check_vector(L->bias_hh, rows, name, l, "bias_hh", err, errlen);
}

/* check_log_std validates the log_std field against the head kind. */
static int check_log_std(ro_policy_params_t *p, const Rollout__V1__PolicyParams *m,
                         const char *name, char *err, size_t errlen)
{
    const Rollout__V1__Tensor *t = m->log_std;
    if (p->composite) { /* one per Gaussian head: params_layout.c counts them */
        if (!t)
            return 0;
        if (t->n_shape != 1 || t->shape[0] == 0 || t->shape[0] > p->action_dim)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: log_std must have shape [k], k in 1..%u (the Gaussian heads)",
                              name, p->action_dim);
        if (t->n_data != t->shape[0])
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: log_std has shape [%u] but %zu data values", name, t->shape[0],
                              t->n_data);
        p->nlog_std = t->shape[0];
        return 0;
    }
    if (p->action_kind == RO_SPACE_DISCRETE) {
        if (t)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: log_std is set but action_kind is \"discrete\"", name);
        return 0;
    }
    if (!t)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: log_std is missing; a box head needs it",
                          name);
    if (t->n_shape != 1 || t->shape[0] != p->action_dim)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: log_std must have shape [%u] (action_dim)",
                          name, p->action_dim);
    if (t->n_data != p->action_dim)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: log_std has shape [%u] but %zu data values",
                          name, p->action_dim, t->n_data);
    return 0;
}

int ro__policy_params_frame(const uint8_t *buf, size_t avail, size_t len, size_t *prefix,
                            uint64_t *msglen, const char *name, char *err, size_t errlen)
{
    uint64_t v = 0;
    int k = ro__varint_get(buf, avail, &v);
    if (k == 0)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          len ? "%s: truncated inside the length prefix" : "%s: file is empty",
                          name);
    if (k < 0)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          buf[RO_VARINT_MAX - 1] & 0x80
                              ? "%s: length prefix is longer than 10 bytes (not a varint)"
                              : "%s: length prefix overflows 64 bits",
                          name);
    size_t rest = len - (size_t)k;
    if (v > rest)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: truncated: the length prefix says %llu bytes but %zu follow", name,
                          (unsigned long long)v, rest);
    if (v < rest)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: %zu bytes of trailing data after the %llu-byte message", name,
                          rest - (size_t)v, (unsigned long long)v);
    *prefix = (size_t)k;
    *msglen = v;
    return 0;
}

int ro__policy_params_check_msg(ro_policy_params_t *p, const Rollout__V1__PolicyParams *m,
                                const char *name, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    int rc = check_header(p, m, name, err, errlen);
    for (uint32_t l = 0; rc == 0 && l < p->nlayers; l++)
        rc = check_layer(p, m, l, name, err, errlen);
    if (rc == 0)
        rc = check_log_std(p, m, name, err, errlen);
    return rc;
}

int ro__policy_params_check_values(const ro_policy_params_t *p, const char *name, char *err,
                                   size_t errlen)
{
    int rc = 0;
    for (uint32_t l = 0; rc == 0 && l < p->nlayers; l++) {
        const ro_policy_layer_t *L = &p->layers[l];
        const size_t rows = ro__policy_layer_rows(L);
        rc = check_finite(L->weight, rows * L->in, name, "weight", l, err, errlen);
        if (rc == 0)
            rc = check_finite(L->bias, rows, name, "bias", l, err, errlen);
        if (rc == 0 && L->cell)
            rc = check_finite(L->weight_hh, rows * L->out, name, "weight_hh", l, err, errlen);
        if (rc == 0 && L->cell)
            rc = check_finite(L->bias_hh, rows, name, "bias_hh", l, err, errlen);
    }
    if (rc == 0 && p->log_std)
        rc = check_finite(p->log_std, p->nlog_std, name, "log_std", UINT32_MAX, err, errlen);
    return rc;
}

int ro__policy_params_from_msg(ro_policy_params_t *out, const Rollout__V1__PolicyParams *m,
                               const char *name, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    ro_policy_params_t p;
    int rc = ro__policy_params_check_msg(&p, m, name, err, errlen);
    if (rc == 0 && ro__policy_params_alloc(&p) < 0)
        rc = ro__errorf(err, errlen, RO_ENOMEM, "%s: out of memory for the weights", name);
    if (rc < 0)
        return rc;
    for (uint32_t l = 0; l < p.nlayers; l++) {
        const Rollout__V1__Layer *L = m->layers[l];
        memcpy(p.layers[l].weight, L->weight->data, L->weight->n_data * sizeof(float));
        memcpy(p.layers[l].bias, L->bias->data, L->bias->n_data * sizeof(float));
        if (p.layers[l].cell) {
            memcpy(p.layers[l].weight_hh, L->weight_hh->data, L->weight_hh->n_data * sizeof(float));
            memcpy(p.layers[l].bias_hh, L->bias_hh->data, L->bias_hh->n_data * sizeof(float));
        }
    }
    if (p.log_std)
        memcpy(p.log_std, m->log_std->data, p.nlog_std * sizeof(float));
    rc = ro__policy_params_check_values(&p, name, err, errlen);
    if (rc == 0 && m->layout) {
        p.layout_len = rollout__v1__policy_layout__get_packed_size(m->layout);
        p.layout = malloc(p.layout_len ? p.layout_len : 1);
        if (!p.layout)
            rc = ro__errorf(err, errlen, RO_ENOMEM, "%s: out of memory", name);
        else
            rollout__v1__policy_layout__pack(m->layout, p.layout);
        if (rc == 0)
            rc = ro__policy_layout_validate(ro__policy_params_view(&p), name, err, errlen);
    }
    if (rc < 0) {
        ro__policy_params_free(&p);
        return rc;
    }
    *out = p;
    return 0;
}

int ro__policy_params_unpack(Rollout__V1__PolicyParams **out, ro_pb_alloc_t *alloc,
                             const uint8_t *buf, size_t len, const char *name, char *err,
                             size_t errlen)
{
    size_t k = 0;
    uint64_t msglen = 0;
    int rc = ro__policy_params_frame(buf, len, len, &k, &msglen, name, err, errlen);
    if (rc < 0)
        return rc;
    const uint8_t *msg = buf + k;
    /* Decoded, the weights take about what they take in the file; the
     * structs around them are bounded by the layer count. A file of empty
     * messages that would decode into far more is refused. */
    *out = (Rollout__V1__PolicyParams *)ro__pb_unpack(alloc, 2 * msglen + (1u << 20),
                                                      &rollout__v1__policy_params__descriptor, msg,
                                                      msglen, name, NULL, err, errlen);
    return *out ? 0 : RO_EBADMSG;
}

int ro__policy_params_check_spaces(const ro_policy_params_t *p, const ro_space_t *obs,
                                   const ro_space_t *act, const char *name, char *err,
                                   size_t errlen)
{
    if (obs->kind != RO_SPACE_BOX)
        return ro__errorf(err, errlen, RO_EINVAL, "%s: the env's observation space is not a box",
                          name);
    if (p->composite)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: action_kind is \"composite\" (an env ABI 2 policy of %u head "
                          "outputs) but the env's action is one %s",
                          name, p->action_dim, act->kind == RO_SPACE_BOX ? "box" : "discrete");
    size_t od = ro_space_size(obs);
    if (od != p->obs_dim)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: obs_dim is %u but the env's observations have %zu floats", name,
                          p->obs_dim, od);
    if (act->kind == RO_SPACE_DISCRETE) {
        if (p->action_kind != RO_SPACE_DISCRETE)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "%s: action_kind is \"box\" but the env's actions are discrete",
                              name);
        if (act->n != p->action_dim)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "%s: action_dim is %u but the env has %u discrete actions", name,
                              p->action_dim, act->n);
        return 0;
    }
    if (act->kind != RO_SPACE_BOX)
        return ro__errorf(err, errlen, RO_EINVAL, "%s: the env's action space has an unknown kind",
                          name);
    if (p->action_kind != RO_SPACE_BOX)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: action_kind is \"discrete\" but the env's actions are a box", name);
    size_t ad = ro_space_size(act);
    if (ad != p->action_dim)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: action_dim is %u but the env's actions have %zu floats", name,
                          p->action_dim, ad);
    return 0;
}

int ro__policy_params_encode(const ro_policy_params_t *p, uint8_t **buf, size_t *len)
{
    /* The message points into p's arrays (protobuf-c's structs want
     * non-const pointers; pack only reads them). */
    Rollout__V1__Tensor wt[RO_POLICY_MAX_HIDDEN + 1], bt[RO_POLICY_MAX_HIDDEN + 1], ls, wh, bh;
    uint32_t whshape[2], bhshape;
    Rollout__V1__Layer layers[RO_POLICY_MAX_HIDDEN + 1], *lp[RO_POLICY_MAX_HIDDEN + 1];
    uint32_t wshape[RO_POLICY_MAX_HIDDEN + 1][2], bshape[RO_POLICY_MAX_HIDDEN + 1];
    uint32_t lshape = p->nlog_std;
    Rollout__V1__PolicyParams m;
    rollout__v1__policy_params__init(&m);
    m.format_version = p->layout ? 2 : 1;
    for (uint32_t l = 0; l < p->nlayers; l++)
        if (p->layers[l].cell)
            m.format_version = 3;
    m.activation = p->activation == RO_ACT_RELU ? (char *)"relu" : (char *)"tanh";
    m.obs_dim = p->obs_dim;
    m.action_kind = p->composite                     ? (char *)"composite"
                    : p->action_kind == RO_SPACE_BOX ? (char *)"box"
                                                     : (char *)"discrete";
    m.action_dim = p->action_dim;
    m.version = p->version;
    for (uint32_t l = 0; l < p->nlayers; l++) {
        const ro_policy_layer_t *L = &p->layers[l];
        const uint32_t rows = (uint32_t)ro__policy_layer_rows(L);
        rollout__v1__tensor__init(&wt[l]);
        wshape[l][0] = rows;
        wshape[l][1] = L->in;
        wt[l].n_shape = 2;
        wt[l].shape = wshape[l];
        wt[l].n_data = (size_t)rows * L->in;
        wt[l].data = L->weight;
        rollout__v1__tensor__init(&bt[l]);
        bshape[l] = rows;
        bt[l].n_shape = 1;
        bt[l].shape = &bshape[l];
        bt[l].n_data = rows;
        bt[l].data = L->bias;
        rollout__v1__layer__init(&layers[l]);
        layers[l].weight = &wt[l];
        layers[l].bias = &bt[l];
        lp[l] = &layers[l];
        if (L->cell) { /* at most one: the layer before the head */
            layers[l].kind = L->cell == RO_CELL_GRU ? (char *)"gru" : (char *)"lstm";
            rollout__v1__tensor__init(&wh);
            whshape[0] = rows;
            whshape[1] = L->out;
            wh.n_shape = 2;
            wh.shape = whshape;
            wh.n_data = (size_t)rows * L->out;
            wh.data = L->weight_hh;
            rollout__v1__tensor__init(&bh);
            bhshape = rows;
            bh.n_shape = 1;
            bh.shape = &bhshape;
            bh.n_data = rows;
            bh.data = L->bias_hh;
            layers[l].weight_hh = &wh;
            layers[l].bias_hh = &bh;
        }
    }
    m.n_layers = p->nlayers;
    m.layers = lp;
    if (p->nlog_std) {
        rollout__v1__tensor__init(&ls);
        ls.n_shape = 1;
        ls.shape = &lshape;
        ls.n_data = p->nlog_std;
        ls.data = p->log_std;
        m.log_std = &ls;
    }

    /* The layout (field 9, already packed) goes after the other fields:
     * the wire format lets fields come in any order. */
    size_t n0 = rollout__v1__policy_params__get_packed_size(&m);
    size_t tail = p->layout ? 1 + ro__varint_size(p->layout_len) + p->layout_len : 0;
    size_t n = n0 + tail, h = ro__varint_size(n);
    uint8_t *b = malloc(h + n);
    if (!b)
        return RO_ENOMEM;
    ro__varint_put(b, n);
    rollout__v1__policy_params__pack(&m, b + h);
    if (p->layout) {
        uint8_t *t = b + h + n0;
        *t++ = 9 << 3 | 2; /* field 9, length-delimited */
        t += ro__varint_put(t, p->layout_len);
        memcpy(t, p->layout, p->layout_len);
    }
    *buf = b;
    *len = h + n;
    return 0;
}
