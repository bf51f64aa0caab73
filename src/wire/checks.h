/*
 * Validation of every protocol message a peer sends (docs/protocol.md),
 * as pure functions of the message and what the receiver expects: the
 * node checks hellos and actions from learners, rollout-learner checks
 * welcomes and observations from nodes. Nothing here trusts a field it has
 * not checked; tests/fuzz/fuzz_frame.c drives every one of them with
 * arbitrary frames. On failure each returns a negative code and one line in
 * err naming the problem (sent back to the peer and logged).
 */
#ifndef RO_WIRE_CHECK_H
#define RO_WIRE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "rollout/env.h"

/* What a node accepts in a hello. */
typedef struct ro_hello_rules {
    bool learners;     /* role "learner" (--learner remote) */
    bool trainers;     /* role "trainer" (local lanes with --listen) */
    const char *token; /* required token, or NULL */
} ro_hello_rules_t;

/* ro__check_hello: version, role and token (compared in constant time).
 * Sets *trainer for role "trainer". RO_EPROTO, or RO_EACCES for the token. */
int ro__check_hello(const Rollout__V1__Hello *h, const ro_hello_rules_t *rules, bool *trainer,
                    char *err, size_t errlen);

/* ro__check_hello_bytes reads a frame's bytes (body[0..len), before they
 * are decoded) for a hello whose role, token or name holds a NUL byte: the
 * decoder would hand on the string cut at it, so "TOKEN\0junk" would pass
 * for TOKEN. RO_EACCES for the token, RO_EPROTO for the others; 0 for
 * anything else (bytes that are not a frame are the decoder's to refuse). */
int ro__check_hello_bytes(const uint8_t *body, size_t len, char *err, size_t errlen);

/* ro__check_first_frame: the first frame of a connection must be a hello
 * that ro__check_hello accepts ("expected hello first, got ..."). */
int ro__check_first_frame(const Rollout__V1__Frame *f, const ro_hello_rules_t *rules, bool *trainer,
                          char *err, size_t errlen);

/* ro__check_actions: an Actions frame answering a batch of `rows` envs
 * whose action space is act: the count, and every value inside the space
 * (finite, in bounds). RO_EPROTO for the count or the wrong kind of
 * values, RO_ERANGE for a value. */
int ro__check_actions(const Rollout__V1__Actions *a, size_t rows, const ro_space_t *act, char *err,
                      size_t errlen);

/* ro__check_action_values: `rows` actions (disc for a discrete space, box
 * for a box one, rows x its size) inside act, answering seq. RO_ERANGE
 * naming the first that is not. */
int ro__check_action_values(const int32_t *disc, const float *box, size_t rows,
                            const ro_space_t *act, uint64_t seq, char *err, size_t errlen);

/* ro__check_state_request: a GetState's or SetState's (set) env indices,
 * nenv of them: 1..num_envs, each below num_envs and named once; nstate
 * states (a SetState's: one per env; a GetState has none). seen is the
 * caller's scratch of (num_envs + 7) / 8 bytes. RO_EPROTO naming the
 * first problem. The blobs are env_state.h's to check. */
int ro__check_state_request(const uint32_t *env, size_t nenv, size_t nstate, bool set,
                            uint32_t num_envs, uint8_t *seen, char *err, size_t errlen);

/* ro__check_space reads a Space: a discrete one with 1..2^20 actions, or a
 * box of 1..4 dims and at most 2^20 values with that many finite bounds,
 * low <= high. out->low/high point into sp. */
int ro__check_space(const Rollout__V1__Space *sp, ro_space_t *out, char *err, size_t errlen);

/* ro__check_welcome: our protocol version, an env spec with a box
 * observation space, an action space and 1..max_envs envs; the spaces are
 * read into obs and act (their bounds point into w). */
int ro__check_welcome(const Rollout__V1__Welcome *w, uint32_t max_envs, ro_space_t *obs,
                      ro_space_t *act, char *err, size_t errlen);

/* ro__check_upgrade: a node's Upgrade (docs/protocol.md "Same-host
 * upgrade"): an absolute socket path that fits a sockaddr_un and a nonce
 * of 16 bytes. RO_EPROTO naming what is wrong. */
int ro__check_upgrade(const Rollout__V1__Upgrade *u, char *err, size_t errlen);

/* ro__check_observation_rows: the n rows of o name envs (what: "env", or
 * "row" for a typed frame) below limit, and its final_index lies inside
 * them. RO_EPROTO naming the first that does not. */
int ro__check_observation_rows(const Rollout__V1__Observations *o, size_t n, uint32_t limit,
                               const char *what, char *err, size_t errlen);

/* ro__check_observations: consistent field lengths for obs_dim floats per
 * env, env indices below num_envs, final_index inside the batch; for a
 * frame in_memory, its ranges only (the columns are in the node's memory,
 * wire/seed_memory.h). */
int ro__check_observations(const Rollout__V1__Observations *o, uint32_t obs_dim, uint32_t num_envs,
                           char *err, size_t errlen);

#endif
