/*
 * Seeded random streams.
 *
 * Every env instance and every per-env action-sampling stream gets its own
 * generator, derived from (node seed, env index, stream id) with ro__seed_mix,
 * where the node seed comes from (run seed, node index) by ro__node_seed, so
 * that what env i sees depends only on the seed and the node index and not
 * on scheduling. The generator is xoshiro256** seeded through splitmix64.
 */
#ifndef RO_RNG_H
#define RO_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct ro_rng {
    uint64_t s[4];
} ro_rng_t;

/* Stream ids passed to ro__seed_mix. */
enum {
    RO_STREAM_ENV = 1,    /* the env's own randomness (resets, noise) */
    RO_STREAM_ACTION = 2, /* the policy's action sampling for that env */
    RO_STREAM_INIT = 3,   /* policy weight initialisation */
    RO_STREAM_NODE = 4,   /* a node's own seed, from (run seed, node index) */
};

/* ro__seed_mix derives a 64-bit seed from a run seed, an index and a stream. */
uint64_t ro__seed_mix(uint64_t seed, uint64_t index, uint64_t stream);

/*
 * ro__node_seed returns the seed that node node_index's env and action
 * streams derive from: the run seed itself for node index 0 (so recordings
 * and runs from before node indices keep their streams bit for bit), and
 * ro__seed_mix(seed, node_index, RO_STREAM_NODE) for any other index, so
 * that nodes started with one --seed still play different episodes. Pure.
 */
uint64_t ro__node_seed(uint64_t seed, uint32_t node_index);

/*
 * ro__random_seed draws a fresh 64-bit run seed from the OS (getrandom(2),
 * which blocks only until the kernel's pool is first initialised at boot).
 * Returns 0, or RO_EIO with a line in err saying what failed. Any thread.
 */
int ro__random_seed(uint64_t *out, char *err, size_t errlen);

/* ro__rng_init seeds a generator from a 64-bit seed. */
void ro__rng_init(ro_rng_t *r, uint64_t seed);

/* ro__rng_next returns 64 random bits. */
static inline uint64_t ro__rng_next(ro_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* ro__rng_double returns a double uniform in [0, 1) with 53 random bits. */
static inline double ro__rng_double(ro_rng_t *r)
{
    return (double)(ro__rng_next(r) >> 11) * 0x1.0p-53;
}

/* ro__rng_uniform returns a double uniform in [lo, hi). */
static inline double ro__rng_uniform(ro_rng_t *r, double lo, double hi)
{
    return lo + (hi - lo) * ro__rng_double(r);
}

/* ro__rng_normal returns a standard normal double (Box-Muller, one of the
 * pair; the other is discarded so the stream position is call-count exact). */
double ro__rng_normal(ro_rng_t *r);

#endif
