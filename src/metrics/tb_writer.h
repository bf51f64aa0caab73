/*
 * TensorBoard event files (--tensorboard DIR): the format TensorBoard and
 * TensorFlow read. A file is a sequence of TFRecords (little-endian u64
 * length, masked CRC-32C of the length, the bytes, masked CRC-32C of the
 * bytes; trajectory/crc32c.h is the CRC), each an Event message
 * (proto/tensorboard.proto, through protobuf-c): first one with
 * file_version "brain.Event:2", then one per interval whose Summary holds
 * that interval's scalars (simple_value) and histograms (HistogramProto).
 *
 * The caller queues values (ro__tb_scalar, ro__tb_histo) and writes them as
 * one event (ro__tb_write), which also flushes the file so TensorBoard
 * sees a running job. Bounded: at most RO_TB_MAX_VALUES values an event.
 *
 * One owner thread (the logger's: the loop thread).
 */
#ifndef RO_TB_WRITER_H
#define RO_TB_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "metrics/histo.h"

#define RO_TB_MAX_VALUES 64
#define RO_TB_MAX_HISTOS 4

typedef struct ro_tb_writer {
    FILE *f;
    char path[4096];
    /* Queued for the next event: tags (the caller's strings, valid until
     * ro__tb_write), scalars, and copies of the histograms. */
    const char *tag[RO_TB_MAX_VALUES];
    double scalar[RO_TB_MAX_VALUES];
    int histo_of[RO_TB_MAX_VALUES]; /* index into histo, or -1: a scalar */
    uint32_t nvalues;
    ro_histo_t histo[RO_TB_MAX_HISTOS];
    uint32_t nhistos;
    uint8_t *buf; /* one packed event, cap bytes */
    size_t cap;
    uint64_t events; /* written, the file_version one included */
    bool failed;     /* a write failed: the file is incomplete */
} ro_tb_writer_t;

/*
 * ro__tb_open creates dir (and its parents) if missing and a new event file
 * in it, named events.out.tfevents.<unix time>.<host>.<pid>.<program> as
 * TensorBoard's own writers name theirs, and writes the file_version event.
 * flag names the flag in messages. Returns 0, or a negative code with one
 * line in err naming the directory or file.
 */
int ro__tb_open(ro_tb_writer_t *w, const char *dir, const char *program, const char *flag,
                char *err, size_t errlen);

/* ro__tb_scalar queues tag = v for the next event; a NaN or infinite v (a
 * mean over no episodes) and values past RO_TB_MAX_VALUES are left out. */
void ro__tb_scalar(ro_tb_writer_t *w, const char *tag, double v);

/* ro__tb_histo queues a copy of h under tag; an empty h is left out (no
 * histogram for an interval without values). */
void ro__tb_histo(ro_tb_writer_t *w, const char *tag, const ro_histo_t *h);

/* ro__tb_write writes the queued values as one event at step (the x axis)
 * stamped wall_time (Unix seconds), flushes the file and empties the
 * queue. Nothing queued: nothing written. Returns 0, or RO_EIO once a
 * write failed (later calls write nothing). */
int ro__tb_write(ro_tb_writer_t *w, int64_t step, double wall_time);

/* ro__tb_close flushes and closes the file. Returns 0, or RO_EIO if any
 * write failed. Again is harmless. */
int ro__tb_close(ro_tb_writer_t *w);

/* ro__tb_record_header fills hdr with a TFRecord's first 12 bytes for a
 * record of len bytes, and returns the masked CRC-32C that follows the
 * data (for tests and other writers of the framing). */
uint32_t ro__tb_record_header(uint8_t hdr[12], const uint8_t *data, size_t len);

#endif
