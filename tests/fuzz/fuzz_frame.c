/*
 * libFuzzer entry point for the wire's frame reader (-Dfuzz=true, clang):
 * what a learner or a node reads from a peer. The input is fed in chunks of
 * varying size (as TCP delivers it) to a reader with a 64 KiB frame limit;
 * every frame decoded is inspected and freed, and an error must stop the
 * stream cleanly.
 *
 *     build-fuzz/tests/fuzz/fuzz_frame -max_total_time=60 tests/fuzz/corpus/frame/
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ro_frame_reader_t rd;
    if (ro__frame_reader_init(&rd, 65536) != 0)
        return 0;
    size_t off = 0, chunk = size ? (size_t)data[0] % 17 + 1 : 1;
    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        if (ro__frame_reader_feed(&rd, data + off, n) != 0)
            break;
        off += n;
        for (;;) {
            ro_frame_t *f;
            char err[256];
            int rc = ro__frame_reader_next(&rd, &f, err, sizeof err);
            if (rc <= 0) {
                if (rc < 0)
                    off = size; /* a broken stream is closed, not resynchronised */
                break;
            }
            if (!ro__frame_kind(f))
                abort();
            ro__frame_free(f);
        }
    }
    ro__frame_reader_free(&rd);
    return 0;
}
