/*
 * rollout-learner's flags.
 */
#ifndef RO_LEARNER_CLI_H
#define RO_LEARNER_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy/policy.h"

#define RO_LEARNER_MAX_NODES 64

typedef struct ro_learner_cfg {
    const char *connect[RO_LEARNER_MAX_NODES]; /* HOST:PORT of each node */
    uint32_t nconnect;
    const char *token_file;
    ro_policy_spec_t policy;
    uint32_t workers;     /* forward-pass threads */
    bool workers_given;   /* --workers given; else threads.c chooses at the first welcome */
    bool spin_given;      /* --spin-us given */
    bool overcommit;      /* allow more workers than allowed CPUs */
    uint32_t batch;       /* envs per forward pass (across nodes) */
    uint64_t max_wait_us; /* wait this long for a fuller batch; 0: what one loop turn brought */
    uint64_t steps;       /* stop after answering this many env steps; 0: no limit */
    double seconds;       /* stop after this long; 0: no limit */
    uint32_t max_frame;
    double reconnect_s; /* give up on a lost node after this long without a connection; 0: never
                           reconnect */
    const char *name;
    const char *push_policy; /* push this PolicyParams file to the nodes, then exit */
    bool json, quiet, help, version;
    bool no_shared_memory;   /* nodes on this host send everything over the socket */
    bool no_ring;            /* SEED nodes on this host send every frame on the socket */
    bool no_upgrade;         /* a TCP link to a node on this host stays on TCP */
    uint32_t spin_us;        /* spin this long for the next observations (runtime/loop_spin.h) */
    const char *tensorboard; /* --tensorboard DIR: event files, or NULL */
    const char *prometheus;  /* --prometheus ADDR: the /metrics endpoint, or NULL */
    double metrics_interval; /* seconds between TensorBoard events */
} ro_learner_cfg_t;

/* ro__learner_cfg_parse parses argv (strings point into argv). On a bad
 * flag or value returns RO_EINVAL with one line in err. */
int ro__learner_cfg_parse(ro_learner_cfg_t *c, int argc, char **argv, char *err, size_t errlen);

void ro__learner_usage(FILE *f);

#endif
