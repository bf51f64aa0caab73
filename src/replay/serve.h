/*
 * rollout-replay --serve: act as a node for one learner, streaming the
 * recorded observations in order over the learner protocol
 * (docs/protocol.md), and compare the learner's actions with the recorded
 * ones. A learner can so be debugged on fixed data.
 */
#ifndef RO_REPLAY_SERVE_H
#define RO_REPLAY_SERVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ro_serve_file {
    const char *name;
    const uint8_t *data;
    size_t len;
} ro_serve_file_t;

/*
 * ro__replay_serve listens on addr ("HOST:PORT", port 0 picks one; the
 * bound address is printed on log), waits for one learner, and streams the
 * files. plugin overrides the env spec of the header (or NULL). Returns the
 * rollout-replay exit status: 0 when every recorded step was served (the
 * mismatch count is reported, not an error), 1 if the learner broke the
 * protocol or left early, 2 if the files or the address are unusable.
 */
int ro__replay_serve(const char *addr, const ro_serve_file_t *files, size_t nfiles,
                     const char *plugin, FILE *log);

#endif
