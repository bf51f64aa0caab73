/*
 * Reading trajectory files: from bytes in memory (a fuzzer's input, a test's
 * buffer) or from a file descriptor, read with pread(2) through a window of
 * bounded size, so that a file that shrinks while it is read (truncated by
 * someone else) ends the reading with a message, never a SIGBUS as a mapped
 * file would. The reader never trusts the bytes: every length, CRC, field
 * count and index is checked. One thread per reader.
 *
 * Resynchronising after damage is linear in the bytes skipped: each offset
 * costs a few bytes and at most one CRC test done in constant time (the
 * CRC of a slice from the CRCs of two prefixes, crc32c.h), and a slice with
 * a valid CRC that is not a valid record is skipped whole after one decode.
 */
#ifndef RO_TRAJ_READER_H
#define RO_TRAJ_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trajectory/format.h"
#include "wire/pb_alloc.h"

/* What ro__traj_reader_next found. */
typedef enum ro_traj_event {
    RO_TRAJ_EOF = 0,   /* the end: nothing more */
    RO_TRAJ_BATCH,     /* *out is a valid batch; free it with ro__traj_batch_free */
    RO_TRAJ_CUT_SHORT, /* the file ends inside a record (msg); then EOF */
    RO_TRAJ_CORRUPT,   /* a damaged record (msg); resync or EOF next */
    RO_TRAJ_RESYNCED,  /* found a valid record again after damage (msg) */
    RO_TRAJ_SHRANK,    /* the file shrank while it was read (msg, an error); then EOF */
    RO_TRAJ_SKIPPED,   /* with a skim filter: a record passed by undecoded (r->skim) */
} ro_traj_event_t;

typedef struct ro_traj_reader {
    /* The input: bytes [win_off, win_off + win_len) are at win. */
    const uint8_t *mem; /* memory input (the whole of it), or NULL */
    int fd;             /* file input, read with pread; -1 for memory */
    uint8_t *buf;       /* file input: the window's bytes */
    size_t buf_cap;
    const uint8_t *win;
    size_t win_off, win_len;
    size_t len; /* the input's length (a file's at open; less once it shrank) */
    size_t len_at_open;
    bool shrank; /* a read found the file shorter than at open */

    size_t off;         /* next byte to read */
    uint64_t next_rec;  /* record number expected next (names damaged records) */
    uint64_t last_read; /* record number of the last batch returned */
    uint32_t max_record;
    bool resync;   /* scan for the next valid record after damage */
    bool scanning; /* after damage, looking for a valid record */
    bool done;
    size_t damage_at; /* where the damage began */
    size_t resync_at; /* a valid record found ahead (the cut-short check), or 0 */

    /* Resync: the CRC of the bytes from cp_base to cp_base + k * RO_TRAJ_CP,
     * for k < cp_have (in the window). */
    uint32_t *cp;
    size_t cp_cap, cp_have, cp_base;

    Rollout__V1__TrajectoryHeader *hdr; /* decoded with hdr_alloc */
    ro_pb_alloc_t hdr_alloc;            /* bounds the header's decoding */
    ro_pb_alloc_t alloc;                /* bounds each batch's decoding */
    char msg[256];                      /* describes the last non-batch event */
    /* An optional skim filter (ro__traj_reader_skim): a record with a
     * valid CRC whose envs none is needed and that holds no snapshots is
     * passed by without decoding; skim says what it held. */
    bool (*need)(void *ctx, uint64_t record, uint32_t env);
    void *need_ctx;
    ro_traj_skim_t skim;
} ro_traj_reader_t;

/* The spacing of the resync checkpoints, bytes. */
#define RO_TRAJ_CP 64

/*
 * ro__traj_reader_open checks the magic and the header record of data
 * (len bytes, which must outlive the reader). With resync, damaged records
 * are skipped by scanning for the next valid one; without it, reading
 * stops at the first damage. Returns 0, or RO_EBADMSG (or RO_ENOMEM) with
 * one line in err (e.g. not a trajectory file); nothing to close then.
 */
int ro__traj_reader_open(ro_traj_reader_t *r, const uint8_t *data, size_t len, bool resync,
                         char *err, size_t errlen);

/*
 * ro__traj_reader_open_fd is ro__traj_reader_open for the regular file open
 * on fd (the caller's; it must stay open until close). It holds at most a
 * window of about twice the header's max_record_bytes (at least 1 MiB, at
 * most the file) and reads it with pread. RO_EIO for a read error.
 */
int ro__traj_reader_open_fd(ro_traj_reader_t *r, int fd, bool resync, char *err, size_t errlen);

/* ro__traj_reader_next reads on. Returns an event; see ro_traj_event_t. */
ro_traj_event_t ro__traj_reader_next(ro_traj_reader_t *r, Rollout__V1__TransitionBatch **out);

/* ro__traj_reader_seek makes the next read start at byte off, expecting
 * record number `record` there (an offset from the file's snapshot index,
 * trajectory/snapshot_index.h). What is found there is checked as any
 * record is. */
void ro__traj_reader_seek(ro_traj_reader_t *r, size_t off, uint64_t record);

/* ro__traj_reader_skim sets r's skim filter (NULL: none): from then on a
 * record none of whose env indices need(ctx, record, env) wants, holding no
 * snapshots, is not decoded: ro__traj_reader_next returns RO_TRAJ_SKIPPED
 * with its record number and step count in r->skim (and checks its CRC
 * and record order, not its columns). A seek's reader uses it to pass the
 * records of envs already past them at the cost of a CRC and a skim. */
void ro__traj_reader_skim(ro_traj_reader_t *r,
                          bool (*need)(void *ctx, uint64_t record, uint32_t env), void *ctx);

/* ro__traj_batch_free frees a batch r returned. */
void ro__traj_batch_free(ro_traj_reader_t *r, Rollout__V1__TransitionBatch *b);

/* ro__traj_reader_take_header hands the header (and its allocator: free
 * it with rollout__v1__trajectory_header__free_unpacked(*hdr,
 * &alloc->base)) to the caller, who may keep it after the reader closes. */
void ro__traj_reader_take_header(ro_traj_reader_t *r, Rollout__V1__TrajectoryHeader **hdr,
                                 ro_pb_alloc_t *alloc);

/* ro__traj_reader_close frees the header (unless taken) and the buffers. */
void ro__traj_reader_close(ro_traj_reader_t *r);

#endif
