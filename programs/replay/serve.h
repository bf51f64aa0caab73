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
    int fd; /* open for reading (the caller's), read with pread */
} ro_serve_file_t;

/* What --serve is told on the command line. */
typedef struct ro_serve_opts {
    const char *addr;       /* "HOST:PORT" (port 0 picks one; printed on log) */
    const char *plugin;     /* --plugin: the recording's plugin env, or NULL */
    const char *token;      /* required in the hello, or NULL (loopback only then) */
    double hello_timeout_s; /* a connection that says no hello this long is dropped; 0: never */
} ro_serve_opts_t;

/*
 * ro__replay_serve listens on o->addr as a node does (loopback unless a
 * token is given; strangers wait in a gate, wire/gate.h, with small frames
 * and a hello deadline), serves the first learner whose hello checks out,
 * and streams the files. Returns the rollout-replay exit status: 0 when
 * every recorded step was served (the mismatch count is reported, not an
 * error), 1 if the served learner broke the protocol or left early, 2 if
 * the files, the env or the address are unusable.
 */
int ro__replay_serve(const ro_serve_opts_t *o, const ro_serve_file_t *files, size_t nfiles,
                     FILE *log);

#endif
