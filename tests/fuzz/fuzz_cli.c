/*
 * libFuzzer entry point for rollout-node's flag parser (-Dfuzz=true,
 * clang): the input is split at NUL bytes into argv; parsing must either
 * succeed or fail with a one-line message, never crash.
 *
 *     build-fuzz/tests/fuzz/fuzz_cli -max_total_time=60 tests/fuzz/corpus/cli/
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Messages quote the offending value as given: a value with a newline
     * in it would make two lines, so such inputs are not checked for that. */
    if (size > 4096 || memchr(data, '\n', size))
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[66] = {"rollout-node"};
    int argc = 1;
    for (size_t i = 0; i <= size && argc < 65;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    ro_config_t c;
    char err[512] = "";
    if (ro__config_parse(&c, argc, argv, err, sizeof err) != 0 && (!err[0] || strchr(err, '\n')))
        abort(); /* an error must come with exactly one line */
    free(buf);
    return 0;
}
