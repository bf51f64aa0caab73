/*
 * Env state blobs: saving and loading one instance of either ABI behind a
 * checked header (env_state.h).
 */
#include "envs/env_state.h"

#include <string.h>

#include "runtime/error.h"
#include "runtime/text.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* fnv adds the bytes of s and its NUL to the hash h. */
static uint64_t fnv(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s;; p++) {
        h = (h ^ *p) * FNV_PRIME;
        if (*p == '\0')
            return h;
    }
}

/* kind_name is the kind's env name (as env_kind.h's, without depending on
 * it: the fuzz target of state blobs links this file alone). */
static const char *kind_name(const ro_env_kind_t *k)
{
    return k->vt2 ? k->vt2->name : k->vt ? k->vt->name : "?";
}

bool ro__env_kind_has_state(const ro_env_kind_t *k)
{
    return k->state.state_size != NULL;
}

uint64_t ro__env_params_hash(const char *name, const ro_env_arg_t *args, size_t nargs,
                             uint32_t max_steps)
{
    uint64_t h = fnv(FNV_OFFSET, name ? name : "");
    /* The args in key order, so that the order given on a command line or
     * in a file does not matter: each round takes the smallest key greater
     * than the last one taken (checked args have unique keys). */
    const char *last = NULL;
    for (size_t round = 0; round < nargs; round++) {
        const ro_env_arg_t *next = NULL;
        for (size_t i = 0; i < nargs; i++)
            if ((last == NULL || strcmp(args[i].key, last) > 0) &&
                (next == NULL || strcmp(args[i].key, next->key) < 0))
                next = &args[i];
        if (next == NULL)
            break;
        h = fnv(fnv(h, next->key), next->value);
        last = next->key;
    }
    for (int i = 0; i < 4; i++)
        h = (h ^ ((max_steps >> (8 * i)) & 0xff)) * FNV_PRIME;
    return h;
}

/* state_size asks the env for its state's bytes and checks the answer and
 * the name against the header's limits. */
static int state_size(const ro_env_kind_t *k, void *env, size_t *out, char *err, size_t errlen)
{
    const char *name = kind_name(k);
    if (!ro__env_kind_has_state(k))
        return ro__errorf(err, errlen, RO_ENOTSUP,
                          "env '%s' has no state support (it gives no save_state()/"
                          "load_state(): docs/env-api.md \"Env state\")",
                          name);
    if (strlen(name) >= RO_ENV_STATE_NAME)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%.40s...': a name of over %d bytes does not fit a state's header",
                          name, RO_ENV_STATE_NAME - 1);
    size_t n = k->state.state_size(env);
    if (n > RO_ENV_STATE_MAX)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': state_size() is %zu bytes, over the limit of %u", name, n,
                          RO_ENV_STATE_MAX);
    *out = n;
    return 0;
}

int ro__env_state_bytes(const ro_env_kind_t *k, void *env, size_t *out, char *err, size_t errlen)
{
    size_t n = 0;
    int rc = state_size(k, env, &n, err, errlen);
    if (rc == 0)
        *out = RO_ENV_STATE_HEADER + n;
    return rc;
}

int ro__env_state_save(const ro_env_kind_t *k, void *env, uint64_t params, uint64_t elapsed,
                       void *buf, size_t cap, size_t *len, char *err, size_t errlen)
{
    size_t n = 0;
    int rc = state_size(k, env, &n, err, errlen);
    if (rc)
        return rc;
    const char *name = kind_name(k);
    if (cap < RO_ENV_STATE_HEADER + n)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': a state takes %zu bytes, the buffer has %zu", name,
                          RO_ENV_STATE_HEADER + n, cap);
    uint8_t *p = buf;
    memset(p, 0, RO_ENV_STATE_HEADER);
    memcpy(p, RO_ENV_STATE_MAGIC, 4);
    put_le32(p + 4, RO_ENV_STATE_BLOB_VERSION);
    memcpy(p + 8, name, strlen(name));
    put_le64(p + 72, params);
    put_le64(p + 80, elapsed);
    put_le64(p + 88, n);
    rc = k->state.save_state(env, p + RO_ENV_STATE_HEADER, n);
    if (rc)
        return ro__errorf(err, errlen, rc < 0 ? rc : RO_EIO, "env '%s': save_state() failed (%d)",
                          name, rc);
    *len = RO_ENV_STATE_HEADER + n;
    return 0;
}

int ro__env_state_peek(const void *blob, size_t len, ro_env_state_info_t *info, char *err,
                       size_t errlen)
{
    const uint8_t *p = blob;
    memset(info, 0, sizeof *info);
    if (len < RO_ENV_STATE_HEADER || memcmp(p, RO_ENV_STATE_MAGIC, 4) != 0)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "not an env state: %s (a state starts with a %d-byte header, magic "
                          "\"%s\")",
                          len < RO_ENV_STATE_HEADER ? "too short" : "wrong magic",
                          RO_ENV_STATE_HEADER, RO_ENV_STATE_MAGIC);
    info->version = get_le32(p + 4);
    if (info->version != RO_ENV_STATE_BLOB_VERSION)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "env state of version %u; this build reads version %u", info->version,
                          RO_ENV_STATE_BLOB_VERSION);
    const char *name = (const char *)p + 8;
    size_t nlen = strnlen(name, RO_ENV_STATE_NAME);
    if (nlen == 0 || nlen == RO_ENV_STATE_NAME)
        return ro__errorf(err, errlen, RO_EBADMSG, "env state: the env name is %s",
                          nlen == 0 ? "empty" : "not NUL-terminated");
    memcpy(info->name, name, nlen);
    info->params = get_le64(p + 72);
    info->elapsed = get_le64(p + 80);
    info->size = get_le64(p + 88);
    if (info->size > RO_ENV_STATE_MAX || info->size != len - RO_ENV_STATE_HEADER)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "env state: its header says %llu bytes of state, %zu follow (at most "
                          "%u)",
                          (unsigned long long)info->size, len - RO_ENV_STATE_HEADER,
                          RO_ENV_STATE_MAX);
    return 0;
}

int ro__env_state_check(const ro_env_kind_t *k, void *env, uint64_t params, const void *blob,
                        size_t len, ro_env_state_info_t *info, char *err, size_t errlen)
{
    size_t n = 0;
    int rc = state_size(k, env, &n, err, errlen);
    if (rc)
        return rc;
    if ((rc = ro__env_state_peek(blob, len, info, err, errlen)))
        return rc;
    const char *name = kind_name(k);
    char shown[96];
    if (strcmp(info->name, name) != 0)
        return ro__errorf(err, errlen, RO_EBADMSG, "env state of env '%s', not of env '%s'",
                          ro__text_log(shown, sizeof shown, info->name, 63), name);
    if (info->params != params)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "env state of env '%s' made with other args (params hash %016llx, "
                          "this instance's %016llx)",
                          name, (unsigned long long)info->params, (unsigned long long)params);
    if (info->size != n)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "env state of env '%s' holds %llu bytes; this instance's state takes "
                          "%zu",
                          name, (unsigned long long)info->size, n);
    return 0;
}

int ro__env_state_load(const ro_env_kind_t *k, void *env, uint64_t params, const void *blob,
                       size_t len, uint64_t *elapsed, char *err, size_t errlen)
{
    ro_env_state_info_t info;
    int rc = ro__env_state_check(k, env, params, blob, len, &info, err, errlen);
    if (rc)
        return rc;
    const char *name = kind_name(k);
    rc = k->state.load_state(env, (const uint8_t *)blob + RO_ENV_STATE_HEADER, (size_t)info.size);
    if (rc)
        return ro__errorf(err, errlen, rc < 0 ? rc : RO_EINVAL,
                          "env '%s' refused the state's bytes (load_state() returned %d)", name,
                          rc);
    if (elapsed)
        *elapsed = info.elapsed;
    return 0;
}
