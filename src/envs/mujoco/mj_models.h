/*
 * The MJCF models of the MuJoCo envs, embedded in the binary at build time
 * (embed_models.py writes the table from the .xml files beside it).
 */
#ifndef RO_ENVS_MUJOCO_MJ_MODELS_H
#define RO_ENVS_MUJOCO_MJ_MODELS_H

#include <stddef.h>

typedef struct ro_mj_embedded {
    const char *name;         /* the file name, e.g. "hopper.xml" */
    const unsigned char *xml; /* its bytes (no NUL terminator) */
    size_t len;
} ro_mj_embedded_t;

/* Read-only: one entry per model file. */
extern const ro_mj_embedded_t ro__mj_models[];
extern const size_t ro__mj_nmodels;

#endif
