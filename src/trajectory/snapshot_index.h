/*
 * The snapshot index of a trajectory file (format version 3,
 * docs/replay.md "Snapshots"): where each env state a file holds is, so a
 * reader seeks to the snapshot before any step without scanning. The
 * writer collects one entry per snapshot it writes and ends each file with
 * the index (records of at most max_record_bytes, each a TransitionBatch
 * with `index` set) and a footer record (`index_at`: the offset of the
 * first index record). A reader finds the footer in the file's last bytes.
 * One thread per index.
 */
#ifndef RO_TRAJ_SNAPSHOT_INDEX_H
#define RO_TRAJ_SNAPSHOT_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trajectory/reader.h"

/* The most entries one file's index holds (about 40 bytes each in memory);
 * snapshots past it are still written, and `truncated` says so. */
#define RO_TRAJ_INDEX_MAX (1u << 18)

typedef struct ro_traj_index {
    size_t n, cap;
    uint64_t *record, *offset, *steps_after, *env_steps;
    uint32_t *env;
    uint64_t steps; /* steps of the recording up to the file's end */
    bool truncated;
} ro_traj_index_t;

/* ro__traj_index_free frees the entries; a zeroed index is fine. */
void ro__traj_index_free(ro_traj_index_t *ix);

/* ro__traj_index_add appends one entry (past RO_TRAJ_INDEX_MAX it only
 * sets truncated). RO_ENOMEM. */
int ro__traj_index_add(ro_traj_index_t *ix, uint64_t record, uint64_t offset, uint64_t steps_after,
                       uint32_t env, uint64_t env_steps);

/* ro__traj_batch_steps counts b's step entries (rows), resets left out. */
uint64_t ro__traj_batch_steps(const Rollout__V1__TransitionBatch *b);

/* ro__traj_index_per_record is how many entries one index record of at
 * most max_record bytes holds. */
size_t ro__traj_index_per_record(uint32_t max_record);

/* ro__traj_index_view points msg at entries [from, from + n) of ix. */
void ro__traj_index_view(const ro_traj_index_t *ix, size_t from, size_t n,
                         Rollout__V1__SnapshotIndex *msg);

/*
 * ro__traj_index_load reads the index of the file r reads (opened, header
 * checked; r's position is left alone): the footer in the file's last
 * bytes, then every index record from where it points to the footer, each
 * framed, CRC-checked, decoded within bounds and checked (equal column
 * lengths, envs of the header, records and offsets in file order, before
 * the index). Untrusted input. 0 with *ix filled; RO_ENOENT (msg) for a
 * file without an index (cut short, or recorded without snapshots);
 * RO_EBADMSG (msg) for a damaged one; RO_ENOMEM.
 */
int ro__traj_index_load(ro_traj_reader_t *r, ro_traj_index_t *ix, char *err, size_t errlen);

#endif
