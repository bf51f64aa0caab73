#include "runtime/rng.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/random.h>

#include "runtime/error.h"

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t ro__seed_mix(uint64_t seed, uint64_t index, uint64_t stream)
{
    /* Three chained splitmix64 rounds: each input changes every output bit. */
    uint64_t st = seed;
    uint64_t a = splitmix64(&st);
    st = a ^ (index * 0xd1b54a32d192ed03ull);
    uint64_t b = splitmix64(&st);
    st = b ^ (stream * 0x8cb92ba72f3d8dd7ull);
    return splitmix64(&st);
}

uint64_t ro__node_seed(uint64_t seed, uint32_t node_index)
{
    /* Index 0 is the run seed unchanged: every stream of a node without
     * --node-index is what it was before the flag existed. */
    return node_index == 0 ? seed : ro__seed_mix(seed, node_index, RO_STREAM_NODE);
}

int ro__random_seed(uint64_t *out, char *err, size_t errlen)
{
    uint8_t buf[sizeof *out];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t n = getrandom(buf + got, sizeof buf - got, 0);
        if (n < 0 && errno == EINTR) /* a signal while the pool was not ready yet */
            continue;
        if (n <= 0)
            return ro__errorf(err, errlen, RO_EIO,
                              "cannot draw a random seed from the OS (getrandom: %s); give "
                              "--seed S",
                              n < 0 ? strerror(errno) : "no bytes");
        got += (size_t)n;
    }
    memcpy(out, buf, sizeof buf);
    return 0;
}

void ro__rng_init(ro_rng_t *r, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&st);
}

double ro__rng_normal(ro_rng_t *r)
{
    /* 1 - u lies in (0, 1], so log() never sees 0. */
    double u1 = 1.0 - ro__rng_double(r);
    double u2 = ro__rng_double(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
