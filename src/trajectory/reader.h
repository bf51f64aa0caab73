/*
 * Reading trajectory files: the reader works on bytes in memory (a mapped
 * file, or a fuzzer's input) and never trusts them: every length, CRC,
 * field count and index is checked. One thread per reader.
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
    size_t damage_at;                   /* where the damage began */
    Rollout__V1__TrajectoryHeader *hdr; /* decoded with hdr_alloc */
    ro_pb_alloc_t hdr_alloc;            /* bounds the header's decoding */
    ro_pb_alloc_t alloc;                /* bounds each batch's decoding */
    char msg[256];                      /* describes the last non-batch event */
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

/* ro__traj_batch_free frees a batch r returned. */
void ro__traj_batch_free(ro_traj_reader_t *r, Rollout__V1__TransitionBatch *b);

/* ro__traj_reader_take_header hands the header (and its allocator: free
 * it with rollout__v1__trajectory_header__free_unpacked(*hdr,
 * &alloc->base)) to the caller, who may keep it after the reader closes. */
void ro__traj_reader_take_header(ro_traj_reader_t *r, Rollout__V1__TrajectoryHeader **hdr,
                                 ro_pb_alloc_t *alloc);

/* ro__traj_reader_close frees the header, unless taken. */
void ro__traj_reader_close(ro_traj_reader_t *r);

#endif
