/*
 * Writing trajectory files: the writer appends records to a buffer and
 * writes it with write(2) when full; one thread (the recorder's I/O
 * thread, or a test) uses it.
 */
#ifndef RO_TRAJ_WRITER_H
#define RO_TRAJ_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trajectory/format.h"
#include "trajectory/snapshot_index.h"

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
    bool broken; /* a write failed: no index is written */
    /* Format version 3 (hdr->snapshot_every set): the steps so far (every
     * part) and the current part's snapshot index, written at its end. */
    uint64_t steps;
    ro_traj_index_t index;
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
 * next part first if the current file would grow past max_bytes. In a
 * version 3 file each of b's snapshots gets an index entry. */
int ro__traj_writer_append(ro_traj_writer_t *w, Rollout__V1__TransitionBatch *b, char *err,
                           size_t errlen);

/* ro__traj_writer_close ends a version 3 file with its snapshot index
 * (each rotated part gets its own when it is closed), flushes, fsyncs and
 * closes; frees the buffer. Safe on a writer that failed to open or is
 * already closed. */
int ro__traj_writer_close(ro_traj_writer_t *w, char *err, size_t errlen);

#endif
