/*
 * Env state blobs (docs/env-api.md "Env state"): one instance's state, as
 * its kind's save_state() wrote it (rollout/env.h), behind a header that
 * says whose state it is. The one place that saves and loads an instance
 * of either ABI: the recorder's snapshots, rollout-replay's seek and fork
 * and the Python engine all come here, so a blob from a file or a peer is
 * checked the same way before any env sees it.
 *
 * A blob, all integers little-endian:
 *   0   4  magic "ROES"
 *   4   4  version (RO_ENV_STATE_BLOB_VERSION)
 *   8  64  env name, NUL-padded (a name of at most 63 bytes)
 *  72   8  params: ro__env_params_hash of the args the instance was made with
 *  80   8  elapsed: steps of the current episode (the runtime's episode
 *          limit counts them; the env's own state does not hold them)
 *  88   8  size: bytes of the env's state that follow
 *  96 size the env's state
 * Pure functions besides the env's own calls: the thread that owns env.
 */
#ifndef RO_ENV_STATE_H
#define RO_ENV_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envs/registry.h"

#define RO_ENV_STATE_MAGIC "ROES" /* 4 bytes, no NUL */
#define RO_ENV_STATE_BLOB_VERSION 1u
#define RO_ENV_STATE_NAME 64 /* bytes of the name field, NUL included */
#define RO_ENV_STATE_HEADER 96

/* A blob's header, as ro__env_state_peek read it. */
typedef struct ro_env_state_info {
    uint32_t version;
    char name[RO_ENV_STATE_NAME]; /* NUL-terminated */
    uint64_t params;
    uint64_t elapsed;
    uint64_t size; /* of the env's state: the blob is RO_ENV_STATE_HEADER + size bytes */
} ro_env_state_info_t;

/* ro__env_kind_has_state tells whether the kind saves and loads states. */
bool ro__env_kind_has_state(const ro_env_kind_t *k);

/*
 * ro__env_params_hash hashes what makes two instances of an env the same
 * env: its name, its args (as checked by ro__env_kind_check_args, in any
 * order) and the runtime's episode limit. FNV-1a 64. Pure.
 */
uint64_t ro__env_params_hash(const char *name, const ro_env_arg_t *args, size_t nargs,
                             uint32_t max_steps);

/*
 * ro__env_state_bytes sets *out to the blob bytes of env's state (header
 * included). RO_ENOTSUP naming the env when its kind has no state support,
 * RO_EINVAL when state_size() is over RO_ENV_STATE_MAX or the name too long
 * for the header.
 */
int ro__env_state_bytes(const ro_env_kind_t *k, void *env, size_t *out, char *err, size_t errlen);

/*
 * ro__env_state_save writes env's state as a blob into buf (cap bytes, at
 * least ro__env_state_bytes), with params and elapsed in its header; *len
 * gets its bytes. 0, or a negative code with a message (no state support,
 * buffer too small, save_state() failed).
 */
int ro__env_state_save(const ro_env_kind_t *k, void *env, uint64_t params, uint64_t elapsed,
                       void *buf, size_t cap, size_t *len, char *err, size_t errlen);

/*
 * ro__env_state_peek reads and checks a blob's header on its own (magic,
 * version, a NUL-terminated name, size = len - header, size at most
 * RO_ENV_STATE_MAX). Untrusted input; RO_EBADMSG with a message.
 */
int ro__env_state_peek(const void *blob, size_t len, ro_env_state_info_t *info, char *err,
                       size_t errlen);

/*
 * ro__env_state_check does every check of ro__env_state_load without
 * loading: a blob that passes is one env's state load_state() may be given
 * (so a caller restoring several envs checks them all before any env sees
 * one). *info gets its header. 0, RO_EBADMSG or RO_ENOTSUP with a message.
 */
int ro__env_state_check(const ro_env_kind_t *k, void *env, uint64_t params, const void *blob,
                        size_t len, ro_env_state_info_t *info, char *err, size_t errlen);

/*
 * ro__env_state_load checks blob (ro__env_state_peek, then: the name is
 * the kind's, params the instance's, size its state_size()) and only then
 * hands the state to the env's load_state(). *elapsed (may be NULL) gets
 * the header's episode steps. 0; RO_EBADMSG (the blob is not a state of
 * this env: nothing was loaded); RO_ENOTSUP (no state support); or
 * load_state()'s error (the env refused the bytes: reset it before use).
 */
int ro__env_state_load(const ro_env_kind_t *k, void *env, uint64_t params, const void *blob,
                       size_t len, uint64_t *elapsed, char *err, size_t errlen);

#endif
