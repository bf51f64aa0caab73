/*
 * Trajectory files (docs/replay.md): an 8-byte magic, then records. A
 * record is a varint byte count, that many bytes of one protobuf message,
 * then the CRC-32C of those bytes (4 bytes, little-endian). Record 0 is a
 * TrajectoryHeader, every later one a TransitionBatch.
 *
 * The writer appends to a buffer and writes it with write(2) when full; it
 * is used by one thread (the recorder's I/O thread, or a test). The reader
 * works on bytes in memory (a mapped file, or a fuzzer's input) and never
 * trusts them: every length, CRC, field count and index is checked.
 */
#ifndef RO_TRAJECTORY_FILE_H
#define RO_TRAJECTORY_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"

#define RO_TRAJ_MAGIC "ROTRAJ1\n" /* 8 bytes, no NUL */
#define RO_TRAJ_MAGIC_LEN 8
#define RO_TRAJ_HEADER_MAGIC "rollout-trajectory"
#define RO_TRAJ_FORMAT_VERSION 1u
/* No record payload is ever longer; a header may promise less. */
#define RO_TRAJ_MAX_RECORD (256u << 20)

/* TransitionBatch.flags bits. */
enum {
    RO_TRAJ_TERMINATED = 1,
    RO_TRAJ_TRUNCATED = 2,
    RO_TRAJ_FAILED = 4, /* the step failed or was not finite; obs is zeros */
    RO_TRAJ_RESET = 8,  /* a reset entry: step 0, no action, no reward */
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

typedef struct ro_traj_writer {
    int fd;
    const char *path; /* part 0; part k is path.k */
    uint32_t part;
    uint64_t max_bytes; /* rotate before a file would pass this; 0 = never */
    uint64_t file_bytes;
    uint64_t file_records; /* batches in the current file */
    uint64_t total_bytes;  /* over every part */
    uint64_t batches;      /* over every part */
    uint8_t *buf;
    size_t len, cap;
    Rollout__V1__TrajectoryHeader *hdr; /* the caller's; part is set per file */
    /* After a failed write (disk full, I/O error): the records cut from the
     * end of the file or never written, and the entries in them. */
    uint64_t lost_records, lost_steps, lost_resets;
} ro_traj_writer_t;

/*
 * ro__traj_writer_open creates (truncates) path and writes the magic and
 * hdr (whose max_record_bytes must be set). hdr and path must outlive the
 * writer. On failure returns a negative code with the path in err.
 */
int ro__traj_writer_open(ro_traj_writer_t *w, const char *path, Rollout__V1__TrajectoryHeader *hdr,
                         uint64_t max_bytes, char *err, size_t errlen);

/* ro__traj_writer_flush writes the buffer out. If a write fails (ENOSPC,
 * EIO) the file is cut back to its last whole record, so it never ends in a
 * torn one; the records lost are counted in lost_*, and err says how many
 * records the file keeps. */
int ro__traj_writer_flush(ro_traj_writer_t *w, char *err, size_t errlen);

/* ro__traj_writer_append sets b->record and appends it, rotating to the
 * next part first if the current file would grow past max_bytes. */
int ro__traj_writer_append(ro_traj_writer_t *w, Rollout__V1__TransitionBatch *b, char *err,
                           size_t errlen);

/* ro__traj_writer_close flushes, fsyncs and closes; frees the buffer.
 * Safe on a writer that failed to open or is already closed. */
int ro__traj_writer_close(ro_traj_writer_t *w, char *err, size_t errlen);

/* What ro__traj_reader_next found. */
typedef enum ro_traj_event {
    RO_TRAJ_EOF = 0,   /* the end: nothing more */
    RO_TRAJ_BATCH,     /* *out is a valid batch; free it with ro__traj_batch_free */
    RO_TRAJ_CUT_SHORT, /* the file ends inside a record (msg); then EOF */
    RO_TRAJ_CORRUPT,   /* a damaged record (msg); resync or EOF next */
    RO_TRAJ_RESYNCED,  /* found a valid record again after damage (msg) */
} ro_traj_event_t;

typedef struct ro_traj_reader {
    const uint8_t *data;
    size_t len;
    size_t off;        /* next byte to read */
    uint64_t next_rec; /* record number expected next */
    uint32_t max_record;
    bool resync;   /* scan for the next valid record after damage */
    bool scanning; /* after damage, looking for a valid record */
    bool done;
    size_t damage_at; /* where the damage began */
    Rollout__V1__TrajectoryHeader *hdr;
    char msg[256]; /* describes the last non-batch event */
} ro_traj_reader_t;

/*
 * ro__traj_reader_open checks the magic and the header record of data
 * (len bytes, which must outlive the reader). With resync, damaged records
 * are skipped by scanning for the next valid one; without it, reading
 * stops at the first damage. Returns 0, or RO_EBADMSG with one line in err
 * (e.g. not a trajectory file).
 */
int ro__traj_reader_open(ro_traj_reader_t *r, const uint8_t *data, size_t len, bool resync,
                         char *err, size_t errlen);

/* ro__traj_reader_next reads on. Returns an event; see ro_traj_event_t. */
ro_traj_event_t ro__traj_reader_next(ro_traj_reader_t *r, Rollout__V1__TransitionBatch **out);

/* ro__traj_batch_free frees a batch returned by the reader. */
void ro__traj_batch_free(Rollout__V1__TransitionBatch *b);

/* ro__traj_reader_close frees the header. */
void ro__traj_reader_close(ro_traj_reader_t *r);

/* ro__traj_validate_header checks a decoded header; 0 or RO_EBADMSG. */
int ro__traj_validate_header(const Rollout__V1__TrajectoryHeader *h, char *err, size_t errlen);

/* ro__traj_validate_batch checks a decoded batch against its header. */
int ro__traj_validate_batch(const Rollout__V1__TrajectoryHeader *h,
                            const Rollout__V1__TransitionBatch *b, char *err, size_t errlen);

#endif
