/*
 * Weights files (params.h): decoding a PolicyParams from its wire format in
 * two passes, from memory or from a file read with pread, and saving one.
 *
 * Why not protobuf-c's unpack, as for frames: it allocates every element of
 * a repeated field before anything can be checked, so a file of empty
 * layers decodes into many times its size, and it needs the whole file in
 * memory beside the decoded copy and the weights. Here the first pass walks
 * the message without allocating (and stops at the 10th layer), the shapes are checked against the
 * counts it found (ro__policy_params_check_msg, the checks pushed policies get too), and the second
 * pass copies the values straight into the weights.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/params.h"
#include "runtime/error.h"
#include "runtime/io.h"
#include "wire/varint.h"

/* The read buffer of a file. */
#define CHUNK (64u << 10)
/* Strings kept of activation and action_kind: enough to show them. */
#define STR_KEEP 40

/* The input: memory, or a file read through a buffer. */
typedef struct src {
    const uint8_t *mem;
    int fd;
    uint8_t *buf; /* bytes [buf_off, buf_off + buf_len) of the file */
    size_t buf_off, buf_len;
    size_t len;
    bool failed; /* a read failed, or the file changed under us */
} src_t;

/* Up to n bytes at off (fewer at the end of the input or of the read
 * buffer): a pointer and *got (0: none, the input ended or a read failed). */
static const uint8_t *src_at(src_t *s, size_t off, size_t n, size_t *got)
{
    *got = 0;
    if (off >= s->len)
        return NULL;
    if (n > s->len - off)
        n = s->len - off;
    if (s->mem) {
        *got = n;
        return s->mem + off;
    }
    size_t want = n < CHUNK ? n : CHUNK;
    if (off < s->buf_off || off + want > s->buf_off + s->buf_len) {
        size_t fill = s->len - off < CHUNK ? s->len - off : CHUNK, have = 0;
        while (have < fill) {
            ssize_t r = pread(s->fd, s->buf + have, fill - have, (off_t)(off + have));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) { /* an error, or the file shrank */
                s->failed = true;
                return NULL;
            }
            have += (size_t)r;
        }
        s->buf_off = off;
        s->buf_len = have;
    }
    size_t have = s->buf_off + s->buf_len - off;
    *got = n < have ? n : have;
    return s->buf + (off - s->buf_off);
}

/* ---------- the wire format, one field at a time ---------- */

typedef struct tensor {
    bool seen;
    uint32_t shape[2]; /* the first two extents */
    size_t n_shape, n_data;
    float *dst; /* the second pass: where the values go (n_data of them) */
    size_t copied;
} tensor_t;

typedef struct scan {
    const char *name;
    char *err;
    size_t errlen;
    bool copy; /* the second pass */
    uint32_t format_version, obs_dim, action_dim;
    uint64_t version;
    char activation[STR_KEEP], action_kind[STR_KEEP];
    uint32_t nlayers;
    tensor_t weight[RO_POLICY_MAX_HIDDEN + 1], bias[RO_POLICY_MAX_HIDDEN + 1], log_std;
    /* format 3: each layer's kind and recurrent side (checked: a cell is
     * the layer before the head) */
    char kind[RO_POLICY_MAX_HIDDEN + 1][STR_KEEP];
    tensor_t weight_hh[RO_POLICY_MAX_HIDDEN + 1], bias_hh[RO_POLICY_MAX_HIDDEN + 1];
    bool layout_seen; /* format 2: the PolicyLayout's bytes, copied after the checks */
    size_t layout_off, layout_len;
} scan_t;

static int bad(scan_t *sc, const char *what, size_t off)
{
    return ro__errorf(sc->err, sc->errlen, RO_EBADMSG,
                      "%s: not a valid PolicyParams message (protobuf decoding failed: %s at byte "
                      "%zu)",
                      sc->name, what, off);
}

static int get_varint(src_t *s, scan_t *sc, size_t *off, size_t end, uint64_t *v)
{
    size_t got;
    const uint8_t *p =
        src_at(s, *off, end - *off < RO_VARINT_MAX ? end - *off : RO_VARINT_MAX, &got);
    int k = p ? ro__varint_get(p, got, v) : 0;
    if (k <= 0)
        return bad(sc, "a malformed varint", *off);
    *off += (size_t)k;
    return 0;
}

/* A field's key: its number (never 0) and wire type. */
static int get_key(src_t *s, scan_t *sc, size_t *off, size_t end, unsigned *field, unsigned *wt)
{
    size_t at_key = *off;
    uint64_t key = 0;
    int rc = get_varint(s, sc, off, end, &key);
    if (rc == 0 && (key >> 3 == 0 || key >> 3 > 536870911u))
        rc = bad(sc, "a field number out of range", at_key);
    *field = (unsigned)(key >> 3);
    *wt = key & 7;
    return rc;
}

/* Skips the value of a field of wire type wt at *off. */
static int skip(src_t *s, scan_t *sc, size_t *off, size_t end, unsigned wt)
{
    uint64_t v;
    size_t n = wt == 1 ? 8 : wt == 5 ? 4 : 0;
    if (wt == 0)
        return get_varint(s, sc, off, end, &v);
    if (wt == 2) {
        int rc = get_varint(s, sc, off, end, &v);
        if (rc)
            return rc;
        if (v > end - *off)
            return bad(sc, "a field longer than its message", *off);
        *off += (size_t)v;
        return 0;
    }
    if (!n)
        return bad(sc, "an unsupported wire type", *off);
    if (n > end - *off)
        return bad(sc, "a field longer than its message", *off);
    *off += n;
    return 0;
}

/* The bytes of a length-delimited field: [*start, *start + *n). */
static int get_len(src_t *s, scan_t *sc, size_t *off, size_t end, unsigned wt, size_t *n)
{
    uint64_t v;
    if (wt != 2)
        return bad(sc, "a message field of the wrong wire type", *off);
    int rc = get_varint(s, sc, off, end, &v);
    if (rc == 0 && v > end - *off)
        rc = bad(sc, "a field longer than its message", *off);
    *n = (size_t)v;
    return rc;
}

/* Floats [off, off + n * 4): counted, and in the second pass copied. */
static int floats(src_t *s, scan_t *sc, tensor_t *t, size_t off, size_t n)
{
    if (sc->copy) {
        if (n > t->n_data - t->copied) /* the file changed between the passes */
            return ro__errorf(sc->err, sc->errlen, RO_EIO, "%s: changed while it was read",
                              sc->name);
        for (size_t done = 0; done < n * sizeof(float);) {
            size_t got;
            const uint8_t *p = src_at(s, off + done, n * sizeof(float) - done, &got);
            if (!p)
                return bad(sc, "values cut short", off + done);
            memcpy((uint8_t *)t->dst + t->copied * sizeof(float) + done, p, got);
            done += got;
        }
        t->copied += n;
        return 0;
    }
    t->n_data += n;
    return 0;
}

static int parse_tensor(src_t *s, scan_t *sc, tensor_t *t, size_t off, size_t end)
{
    while (off < end) {
        unsigned field, wt;
        int rc = get_key(s, sc, &off, end, &field, &wt);
        if (rc)
            return rc;
        if (field == 1 && (wt == 0 || wt == 2)) { /* shape: one varint, or packed */
            size_t stop = end;
            if (wt == 2) {
                size_t n;
                if ((rc = get_len(s, sc, &off, end, wt, &n)))
                    return rc;
                stop = off + n;
            }
            do {
                uint64_t v;
                if ((rc = get_varint(s, sc, &off, stop, &v)))
                    return rc;
                if (!sc->copy && t->n_shape < 2)
                    t->shape[t->n_shape] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
                t->n_shape += !sc->copy;
            } while (wt == 2 && off < stop);
        } else if (field == 2 && wt == 5) { /* one value */
            if (4 > end - off)
                return bad(sc, "a field longer than its message", off);
            if ((rc = floats(s, sc, t, off, 1)))
                return rc;
            off += 4;
        } else if (field == 2 && wt == 2) { /* packed values */
            size_t n;
            if ((rc = get_len(s, sc, &off, end, wt, &n)))
                return rc;
            if (n % sizeof(float))
                return bad(sc, "packed floats of a length not a multiple of 4", off);
            if ((rc = floats(s, sc, t, off, n / sizeof(float))))
                return rc;
            off += n;
        } else if (field == 1 || field == 2) {
            return bad(sc, "a tensor field of the wrong wire type", off);
        } else if ((rc = skip(s, sc, &off, end, wt))) {
            return rc;
        }
    }
    return 0;
}

/* A tensor field (a message set once): parsed into t. */
static int tensor_field(src_t *s, scan_t *sc, tensor_t *t, const char *what, size_t *off,
                        size_t end, unsigned wt)
{
    size_t n = 0; /* set by get_len on success; the compiler cannot tell */
    int rc = get_len(s, sc, off, end, wt, &n);
    if (rc)
        return rc;
    if (t->seen && !sc->copy)
        return ro__errorf(sc->err, sc->errlen, RO_EBADMSG, "%s: %s appears twice", sc->name, what);
    t->seen = true;
    rc = parse_tensor(s, sc, t, *off, *off + n);
    *off += n;
    return rc;
}

static int string_field(src_t *s, scan_t *sc, char *out, size_t *off, size_t end, unsigned wt);

static int parse_layer(src_t *s, scan_t *sc, uint32_t l, size_t off, size_t end)
{
    char what[40];
    while (off < end) {
        unsigned field, wt;
        int rc = get_key(s, sc, &off, end, &field, &wt);
        if (rc)
            return rc;
        static const char *const names[] = {"", "weight", "bias", "kind", "weight_hh", "bias_hh"};
        tensor_t *const t[] = {NULL, &sc->weight[l],    &sc->bias[l],
                               NULL, &sc->weight_hh[l], &sc->bias_hh[l]};
        if (field == 3) {
            rc = string_field(s, sc, sc->kind[l], &off, end, wt);
        } else if (field >= 1 && field <= 5) {
            snprintf(what, sizeof what, "layers[%u].%s", l, names[field]);
            rc = tensor_field(s, sc, t[field], what, &off, end, wt);
        } else {
            rc = skip(s, sc, &off, end, wt);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* A string field: kept (cut to STR_KEEP - 1 bytes; the checks show it). */
static int string_field(src_t *s, scan_t *sc, char *out, size_t *off, size_t end, unsigned wt)
{
    size_t n = 0, got = 0; /* set by get_len and src_at on success */
    int rc = get_len(s, sc, off, end, wt, &n);
    if (rc)
        return rc;
    const uint8_t *p = n ? src_at(s, *off, n < STR_KEEP - 1 ? n : STR_KEEP - 1, &got) : NULL;
    if (n && !p)
        return bad(sc, "a string cut short", *off);
    memcpy(out, p ? (const char *)p : "", n ? got : 0);
    out[n ? got : 0] = '\0';
    *off += n;
    return 0;
}

static int scalar(src_t *s, scan_t *sc, size_t *off, size_t end, unsigned wt, uint64_t *v)
{
    if (wt != 0)
        return bad(sc, "a number of the wrong wire type", *off);
    return get_varint(s, sc, off, end, v);
}

/* One pass over the PolicyParams at [off, end). */
static int parse_params(src_t *s, scan_t *sc, size_t off, size_t end)
{
    uint32_t layer = 0;
    while (off < end) {
        uint64_t v = 0;
        unsigned field, wt;
        int rc = get_key(s, sc, &off, end, &field, &wt);
        if (rc)
            return rc;
        switch (field) {
        case 1:
        case 3:
        case 5:
        case 8:
            if ((rc = scalar(s, sc, &off, end, wt, &v)))
                return rc;
            if (field == 1)
                sc->format_version = (uint32_t)v;
            else if (field == 3)
                sc->obs_dim = (uint32_t)v;
            else if (field == 5)
                sc->action_dim = (uint32_t)v;
            else
                sc->version = v;
            break;
        case 2:
        case 4:
            rc = string_field(s, sc, field == 2 ? sc->activation : sc->action_kind, &off, end, wt);
            break;
        case 6: {
            size_t n;
            if ((rc = get_len(s, sc, &off, end, wt, &n)))
                return rc;
            /* One layer too many ends the reading: a file of millions of
             * empty layers costs no more than ten. */
            if (layer == RO_POLICY_MAX_HIDDEN + 1)
                return ro__errorf(sc->err, sc->errlen, RO_EBADMSG,
                                  "%s: has %d layers or more; expected 1..%d (up to %d hidden "
                                  "layers, then the head)",
                                  sc->name, RO_POLICY_MAX_HIDDEN + 2, RO_POLICY_MAX_HIDDEN + 1,
                                  RO_POLICY_MAX_HIDDEN);
            rc = parse_layer(s, sc, layer++, off, off + n);
            off += n;
            break;
        }
        case 7:
            rc = tensor_field(s, sc, &sc->log_std, "log_std", &off, end, wt);
            break;
        case 9: {
            size_t n;
            if ((rc = get_len(s, sc, &off, end, wt, &n)))
                return rc;
            if (sc->layout_seen && !sc->copy)
                return ro__errorf(sc->err, sc->errlen, RO_EBADMSG, "%s: layout appears twice",
                                  sc->name);
            if (n > RO_POLICY_LAYOUT_MAX)
                return ro__errorf(sc->err, sc->errlen, RO_EBADMSG,
                                  "%s: layout is %zu bytes; at most %zu", sc->name, n,
                                  RO_POLICY_LAYOUT_MAX);
            sc->layout_seen = true;
            sc->layout_off = off;
            sc->layout_len = n;
            off += n;
            break;
        }
        default:
            rc = skip(s, sc, &off, end, wt);
        }
        if (rc)
            return rc;
    }
    sc->nlayers = layer;
    return s->failed ? ro__errorf(sc->err, sc->errlen, RO_EIO, "%s: read failed", sc->name) : 0;
}

/* Tensors of a skeleton: four per layer, then log_std. */
#define SKEL_TENSORS (4 * (RO_POLICY_MAX_HIDDEN + 1) + 1)

/* The message the first pass found, without its values, for the checks. */
static void skeleton(const scan_t *sc, Rollout__V1__PolicyParams *m, Rollout__V1__Layer *layers,
                     Rollout__V1__Layer **lp, Rollout__V1__Tensor *t, uint32_t (*shapes)[2])
{
    rollout__v1__policy_params__init(m);
    m->format_version = sc->format_version;
    m->activation = (char *)sc->activation;
    m->obs_dim = sc->obs_dim;
    m->action_kind = (char *)sc->action_kind;
    m->action_dim = sc->action_dim;
    m->version = sc->version;
    /* More layers than allowed: the checks refuse the count before they
     * look at any layer. */
    uint32_t nl = sc->nlayers <= RO_POLICY_MAX_HIDDEN + 1 ? sc->nlayers : 0;
    const tensor_t *src[SKEL_TENSORS];
    for (uint32_t l = 0; l < nl; l++) {
        src[4 * l] = &sc->weight[l];
        src[4 * l + 1] = &sc->bias[l];
        src[4 * l + 2] = &sc->weight_hh[l];
        src[4 * l + 3] = &sc->bias_hh[l];
    }
    src[4 * nl] = &sc->log_std;
    for (uint32_t i = 0; i <= 4 * nl; i++) {
        rollout__v1__tensor__init(&t[i]);
        memcpy(shapes[i], src[i]->shape, sizeof shapes[i]);
        t[i].n_shape = src[i]->n_shape;
        t[i].shape = shapes[i]; /* only the first two are read, as n_shape says */
        t[i].n_data = src[i]->n_data;
    }
    for (uint32_t l = 0; l < nl; l++) {
        rollout__v1__layer__init(&layers[l]);
        layers[l].weight = sc->weight[l].seen ? &t[4 * l] : NULL;
        layers[l].bias = sc->bias[l].seen ? &t[4 * l + 1] : NULL;
        layers[l].weight_hh = sc->weight_hh[l].seen ? &t[4 * l + 2] : NULL;
        layers[l].bias_hh = sc->bias_hh[l].seen ? &t[4 * l + 3] : NULL;
        layers[l].kind = (char *)sc->kind[l];
        lp[l] = &layers[l];
    }
    m->n_layers = sc->nlayers;
    m->layers = lp;
    m->log_std = sc->log_std.seen ? &t[4 * nl] : NULL;
    /* The checks ask only whether a layout is there; its bytes are
     * validated once copied (read_layout). */
    static Rollout__V1__PolicyLayout present = ROLLOUT__V1__POLICY_LAYOUT__INIT;
    m->layout = sc->layout_seen ? &present : NULL;
}

/* read_layout copies the layout's bytes into pp and validates them. */
static int read_layout(ro_policy_params_t *pp, src_t *s, const scan_t *sc)
{
    if (!sc->layout_seen)
        return 0;
    pp->layout = malloc(sc->layout_len ? sc->layout_len : 1);
    if (!pp->layout)
        return ro__errorf(sc->err, sc->errlen, RO_ENOMEM, "%s: out of memory", sc->name);
    pp->layout_len = sc->layout_len;
    for (size_t done = 0, got; done < sc->layout_len; done += got) {
        const uint8_t *p = src_at(s, sc->layout_off + done, sc->layout_len - done, &got);
        if (!p)
            return ro__errorf(sc->err, sc->errlen, RO_EIO, "%s: read failed", sc->name);
        memcpy(pp->layout + done, p, got);
    }
    return ro__policy_layout_validate(ro__policy_params_view(pp), sc->name, sc->err, sc->errlen);
}

/* Both passes over s: the weights into *out. */
static int decode_src(ro_policy_params_t *out, src_t *s, const char *name, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t got, prefix;
    uint64_t msglen;
    const uint8_t *p = src_at(s, 0, RO_VARINT_MAX, &got);
    int rc = ro__policy_params_frame(p ? p : (const uint8_t *)"", got, s->len, &prefix, &msglen,
                                     name, err, errlen);
    if (rc)
        return rc;
    scan_t *sc = calloc(1, sizeof *sc);
    if (!sc)
        return ro__errorf(err, errlen, RO_ENOMEM, "%s: out of memory", name);
    sc->name = name;
    sc->err = err;
    sc->errlen = errlen;
    rc = parse_params(s, sc, prefix, s->len);
    ro_policy_params_t pp;
    if (rc == 0) {
        Rollout__V1__PolicyParams m;
        Rollout__V1__Layer layers[RO_POLICY_MAX_HIDDEN + 1], *lp[RO_POLICY_MAX_HIDDEN + 1];
        Rollout__V1__Tensor t[SKEL_TENSORS];
        uint32_t shapes[SKEL_TENSORS][2];
        skeleton(sc, &m, layers, lp, t, shapes);
        rc = ro__policy_params_check_msg(&pp, &m, name, err, errlen);
    }
    /* The weights take no more than the file: every value was counted from
     * the bytes that hold it. */
    if (rc == 0 && ro__policy_params_alloc(&pp) < 0)
        rc = ro__errorf(err, errlen, RO_ENOMEM, "%s: out of memory for the weights", name);
    if (rc == 0) {
        for (uint32_t l = 0; l < pp.nlayers; l++) {
            sc->weight[l].dst = pp.layers[l].weight;
            sc->bias[l].dst = pp.layers[l].bias;
            sc->weight_hh[l].dst = pp.layers[l].weight_hh; /* NULL but for the cell: none came */
            sc->bias_hh[l].dst = pp.layers[l].bias_hh;
        }
        sc->log_std.dst = pp.log_std;
        sc->copy = true;
        rc = parse_params(s, sc, prefix, s->len);
        for (uint32_t l = 0; rc == 0 && l < pp.nlayers; l++)
            if (sc->weight[l].copied != sc->weight[l].n_data ||
                sc->bias[l].copied != sc->bias[l].n_data ||
                sc->weight_hh[l].copied != sc->weight_hh[l].n_data ||
                sc->bias_hh[l].copied != sc->bias_hh[l].n_data)
                rc = ro__errorf(err, errlen, RO_EIO, "%s: changed while it was read", name);
        if (rc == 0)
            rc = ro__policy_params_check_values(&pp, name, err, errlen);
        if (rc == 0)
            rc = read_layout(&pp, s, sc);
        if (rc)
            ro__policy_params_free(&pp);
    }
    free(sc);
    if (rc == 0)
        *out = pp;
    return rc;
}

int ro__policy_params_decode(ro_policy_params_t *out, const uint8_t *buf, size_t len,
                             const char *name, char *err, size_t errlen)
{
    src_t s = {.mem = buf ? buf : (const uint8_t *)"", .fd = -1, .len = len};
    return decode_src(out, &s, name, err, errlen);
}

int ro__policy_params_read(ro_policy_params_t *out, const char *path, char *err, size_t errlen)
{
    return ro__policy_params_load(out, path, NULL, NULL, err, errlen);
}

int ro__policy_params_load(ro_policy_params_t *out, const char *path, const ro_space_t *obs,
                           const ro_space_t *act, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ro__errorf(err, errlen, errno == ENOENT ? RO_ENOENT : RO_EIO, "policy file %s: %s",
                          path, strerror(errno));
    struct stat st = {0};
    int rc = 0;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        rc = ro__errorf(err, errlen, RO_EIO, "policy file %s: not a regular file", path);
    else if ((uint64_t)st.st_size > RO_POLICY_FILE_MAX)
        rc =
            ro__errorf(err, errlen, RO_ERANGE, "policy file %s: %lld bytes, over the %zu MiB limit",
                       path, (long long)st.st_size, RO_POLICY_FILE_MAX >> 20);
    size_t nlen = strlen(path) + sizeof "policy file ";
    char *name = rc ? NULL : malloc(nlen);
    src_t s = {.fd = fd, .len = (size_t)st.st_size, .buf = rc ? NULL : malloc(CHUNK)};
    if (rc == 0 && (!name || !s.buf))
        rc = ro__errorf(err, errlen, RO_ENOMEM, "policy file %s: out of memory", path);
    if (rc == 0) {
        snprintf(name, nlen, "policy file %s", path);
        rc = decode_src(out, &s, name, err, errlen);
        if (rc == 0 && obs &&
            (rc = ro__policy_params_check_spaces(out, obs, act, name, err, errlen)))
            ro__policy_params_free(out);
    }
    free(s.buf);
    free(name);
    close(fd);
    return rc;
}

/* sync_dir makes a rename in path's directory durable. Best effort: some
 * filesystems refuse fsync on a directory, and the file itself is whole
 * either way. */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int ro__policy_params_save(const ro_policy_params_t *p, const char *path, char *err, size_t errlen)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ro__policy_params_encode(p, &buf, &len) < 0)
        return ro__errorf(err, errlen, RO_ENOMEM, "policy file %s: out of memory", path);
    size_t tlen = strlen(path) + sizeof ".tmp.XXXXXX";
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(buf);
        return ro__errorf(err, errlen, RO_ENOMEM, "policy file %s: out of memory", path);
    }
    snprintf(tmp, tlen, "%s.tmp.XXXXXX", path);
    int rc = 0;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        rc = ro__errorf(err, errlen, RO_EIO, "policy file %s: cannot create %s: %s", path, tmp,
                        strerror(errno));
        goto out;
    }
    /* mkstemp makes the file 0600; weights are not secret, so give them
     * the usual mode of a data file. */
    (void)fchmod(fd, 0644);
    if (ro__write_all(fd, buf, len, NULL) < 0 || fsync(fd) < 0) {
        rc = ro__errorf(err, errlen, RO_EIO, "policy file %s: writing %s: %s", path, tmp,
                        strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    if (close(fd) < 0 || rename(tmp, path) < 0) {
        rc = ro__errorf(err, errlen, RO_EIO, "policy file %s: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    sync_dir(path);
out:
    free(tmp);
    free(buf);
    return rc;
}
