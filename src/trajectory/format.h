/*
 * Trajectory files (docs/replay.md): an 8-byte magic, then records. A
 * record is a varint byte count, that many bytes of one protobuf message,
 * then the CRC-32C of those bytes (4 bytes, little-endian). Record 0 is a
 * TrajectoryHeader, every later one a TransitionBatch.
 *
 * This file: the framing, the encoder and the checks; writer.h writes
 * files, reader.h reads them. Pure functions: any thread.
 */
#ifndef RO_TRAJ_FORMAT_H
#define RO_TRAJ_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"

#define RO_TRAJ_MAGIC "ROTRAJ1\n" /* 8 bytes, no NUL */
#define RO_TRAJ_MAGIC_LEN 8
#define RO_TRAJ_HEADER_MAGIC "rollout-trajectory"
/* The newest format version this build reads and writes: 2 carries env
 * ABI 2 (the header's layout, rows of typed tensors). ABI 1 envs' files
 * stay version 1, byte for byte as before; both are read. */
#define RO_TRAJ_FORMAT_VERSION 2u
#define RO_TRAJ_FORMAT_ABI1 1u
/* Version 3: a recording with snapshots (--snapshot-every) of an env of
 * either ABI (the layout says which, as in versions 1 and 2): env states in
 * the records and an index at each file's end (trajectory/snapshot_index.h).
 * Recordings without snapshots keep versions 1 and 2. */
#define RO_TRAJ_FORMAT_SNAPSHOTS 3u
/* No record payload is ever longer; a header may promise less. */
#define RO_TRAJ_MAX_RECORD (256u << 20)

/* TransitionBatch.flags bits. */
enum {
    RO_TRAJ_TERMINATED = 1,
    RO_TRAJ_TRUNCATED = 2,
    RO_TRAJ_FAILED = 4, /* the step failed or was not finite; obs is zeros */
    RO_TRAJ_RESET = 8,  /* a reset entry: step 0, no action, no reward */
    /* With RESET, a learner's Reseed (docs/protocol.md): the episode before
     * was cut there (RESTART), and with RESEEDED the env was re-created
     * from the record's reseed seed first. */
    RO_TRAJ_RESTART = 16,
    RO_TRAJ_RESEEDED = 32,
};

/* ro__traj_frame_size returns the bytes one framed record of a payload
 * of len bytes takes. */
size_t ro__traj_frame_size(size_t len);

/* ro__traj_frame writes message m as one record at out (at least
 * ro__traj_frame_size(packed size) bytes); returns the bytes written. */
size_t ro__traj_frame(uint8_t *out, const ProtobufCMessage *m);

/* ro__traj_batch_packed_size and ro__traj_batch_pack encode a
 * TransitionBatch in one pass over its columns: the same bytes as
 * protobuf_c_message_pack, faster. pack returns the bytes written. */
size_t ro__traj_batch_packed_size(const Rollout__V1__TransitionBatch *b);
size_t ro__traj_batch_pack(const Rollout__V1__TransitionBatch *b, uint8_t *out);

/* ro__traj_validate_header checks a decoded header (version 1, 2 with its
 * layout, or 3 of either with snapshot_every set); 0 or RO_EBADMSG. A newer
 * version is refused by number. */
int ro__traj_validate_header(const Rollout__V1__TrajectoryHeader *h, char *err, size_t errlen);

/* ro__traj_validate_batch checks a decoded batch against its header (ABI 1
 * columns, or version 2 rows: trajectory/abi2_format.h; version 3: its
 * snapshots, or an index or footer record without entries). */
int ro__traj_validate_batch(const Rollout__V1__TrajectoryHeader *h,
                            const Rollout__V1__TransitionBatch *b, char *err, size_t errlen);

/*
 * ro__traj_skim reads, without decoding the message, what a reader needs
 * to pass a record by (rollout-replay --from skips records whose entries
 * come before their envs' snapshots): its record number, how many of its
 * entries are steps (not resets), whether it holds snapshots, and whether
 * need(ctx, record, env) is true for any of its env indices (checked up to
 * the first true; the record number comes first in every record). Untrusted input: -1 when the
 * payload is not a well-formed message (the caller then decodes it, and reports what is wrong).
 * Pure.
 */
typedef struct ro_traj_skim {
    uint64_t record;
    uint64_t steps;
    bool snapshots;
    bool needed;
} ro_traj_skim_t;
int ro__traj_skim(const uint8_t *p, size_t len,
                  bool (*need)(void *ctx, uint64_t record, uint32_t env), void *ctx,
                  ro_traj_skim_t *out);

/* The CRC after each record's payload. */
#define RO_TRAJ_CRC_BYTES 4

/* Little-endian 32-bit values (the CRCs). */
void ro__traj_put_le32(uint8_t *p, uint32_t v);
uint32_t ro__traj_get_le32(const uint8_t *p);

/* ro__traj_record_prefix reads a record's length prefix from p[0..avail):
 * the prefix bytes and *len, 0 if p ends inside it, -1 if it is not a
 * length (over 5 bytes). Untrusted input. */
int ro__traj_record_prefix(const uint8_t *p, size_t avail, uint64_t *len);

#endif
