/*
 * The env ABI's element types (include/rollout/env.h) and the wire's
 * (proto DType), one mapping for every message that carries typed tensors:
 * SEED frames and memory, stream segments, trajectory files. Inline, so
 * that a program built from a few sources (the fuzz targets) needs no other
 * file for it.
 */
#ifndef RO_WIRE_DTYPE_H
#define RO_WIRE_DTYPE_H

#include "rollout.pb-c.h"
#include "rollout/env.h"

/* The env ABI's dtypes and the wire's, pair by pair: the one mapping both
 * directions read. */
static const struct ro_wire_dtype_pair {
    ro_dtype_t env;
    Rollout__V1__DType wire;
} ro__wire_dtypes[] = {
    {RO_DTYPE_UINT8, ROLLOUT__V1__DTYPE__DTYPE_UINT8},
    {RO_DTYPE_INT32, ROLLOUT__V1__DTYPE__DTYPE_INT32},
    {RO_DTYPE_FLOAT32, ROLLOUT__V1__DTYPE__DTYPE_FLOAT32},
};
#define RO_WIRE_NDTYPES (sizeof ro__wire_dtypes / sizeof ro__wire_dtypes[0])

/* ro__wire_dtype maps an env ABI dtype to the wire's (UNSPECIFIED for none). */
static inline Rollout__V1__DType ro__wire_dtype(ro_dtype_t d)
{
    for (size_t i = 0; i < RO_WIRE_NDTYPES; i++)
        if (ro__wire_dtypes[i].env == d)
            return ro__wire_dtypes[i].wire;
    return ROLLOUT__V1__DTYPE__DTYPE_UNSPECIFIED;
}

/* ro__wire_dtype_to_env is ro__wire_dtype's inverse: 0 for a wire dtype an
 * env tensor cannot have (a peer's or a file's word: check for 0). */
static inline ro_dtype_t ro__wire_dtype_to_env(Rollout__V1__DType d)
{
    for (size_t i = 0; i < RO_WIRE_NDTYPES; i++)
        if (ro__wire_dtypes[i].wire == d)
            return ro__wire_dtypes[i].env;
    return (ro_dtype_t)0;
}

#endif
