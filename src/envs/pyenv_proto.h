/*
 * The shared memory of one Python env worker process (pyenv_proc.h) as both
 * sides read it: python/rollout_client/env_worker.py holds the same
 * numbers. All of it is written by an untrusted process too: the node copies
 * out what it uses and checks it (pyenv_host.c), and never takes an offset
 * or a size from it.
 *
 * [0, HEADER)            the header: u32 words at the offsets below, the
 *                        error text at PY_ERR_OFF
 * [SPEC_OFF, +SPEC_MAX)  the env's spaces, written by the worker at hello
 *                        (pyenv_spec.h reads them)
 * [DATA_OFF, ...)        one row per env of the process, PY_H_STRIDE bytes
 *                        apart, its fields at the offsets the node writes
 *                        into the header before ATTACH
 */
#ifndef RO_ENVS_PYENV_PROTO_H
#define RO_ENVS_PYENV_PROTO_H

#define PY_MAGIC 0x45595052u /* "RPYE" */
#define PY_PROTO_VERSION 2u

/* Header words (byte offsets). */
#define PY_H_MAGIC 0
#define PY_H_VERSION 4
#define PY_H_OP 8         /* node: the command */
#define PY_H_SEQ 12       /* node: its sequence number */
#define PY_H_ACK 16       /* worker: the sequence number it finished */
#define PY_H_STATUS 20    /* worker: PY_STATUS_* */
#define PY_H_NENVS 24     /* node: envs of this process */
#define PY_H_STRIDE 28    /* node: bytes per row */
#define PY_H_SPEC_LEN 32  /* worker: bytes of the spec */
#define PY_H_DATA_OFF 36  /* node: where row 0 starts */
#define PY_H_OFF_ACT_I 40 /* node: each field's offset in a row */
#define PY_H_OFF_ACT_F 44
#define PY_H_OFF_REWARD 48
#define PY_H_OFF_FLAGS 52
#define PY_H_OFF_SEED 56
#define PY_H_OFF_OBS 64   /* [RO_ENV_MAX_TENSORS] */
#define PY_H_OFF_RESET 96 /* [RO_ENV_MAX_TENSORS] */
#define PY_H_ERR_LEN 128  /* worker: bytes of text at PY_ERR_OFF; node: 0 before a command */
/* Who sleeps (1) rather than spins, so that the other side writes its
 * eventfd only then: each side stores its own word and loads the other's
 * command or answer word, all seq_cst (pyenv_proc.c, worker.c). */
#define PY_H_NODE_SLEEPS 132   /* node: asleep awaiting the ack */
#define PY_H_WORKER_SLEEPS 136 /* worker: asleep awaiting the next seq */
#define PY_ERR_OFF 1024
#define PY_ERR_MAX 3072
#define PY_HEADER 4096
#define PY_SPEC_OFF 4096
#define PY_SPEC_MAX (1u << 20)
#define PY_DATA_OFF (PY_SPEC_OFF + PY_SPEC_MAX)

/* Commands. HELLO: make one env, write the spec. ATTACH: make the rest,
 * reset each from its row's seed. STEP: step the rows whose go flag is set
 * (an env that ends is reset at once: its first observation into the row's
 * reset area). RESET: reset the rows whose go flag is set. */
#define PY_OP_HELLO 1u
#define PY_OP_ATTACH 2u
#define PY_OP_STEP 3u
#define PY_OP_RESET 4u

#define PY_STATUS_OK 0u
#define PY_STATUS_FATAL 1u /* the worker gives up (text in the header) and exits */

/* A row's flag bytes (at PY_H_OFF_FLAGS). */
#define PY_F_GO 0          /* node: step or reset this env */
#define PY_F_TERM 1        /* worker: terminated */
#define PY_F_TRUNC 2       /* worker: truncated */
#define PY_F_RESET_READY 3 /* worker: the reset area holds a new episode's first observation */
#define PY_F_FAILED 4      /* worker: the env raised; it was made again and reset */
#define PY_F_SEED 5        /* node: RESET with the row's seed (a reseed) */
#define PY_FLAGS 8

#endif
