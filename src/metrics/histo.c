#include "metrics/histo.h"

#include <math.h>
#include <string.h>

const double ro__histo_return_edges[] = {-1e4, -5e3, -2e3, -1e3, -500, -200, -100, -50, -20,
                                         -10,  -5,   -2,   -1,   0,    1,    2,    5,   10,
                                         20,   50,   100,  200,  500,  1e3,  2e3,  5e3, 1e4};
const uint32_t ro__histo_return_nedges =
    sizeof ro__histo_return_edges / sizeof ro__histo_return_edges[0];

const double ro__histo_size_edges[] = {1,   2,   5,   10,  20,  50,  100, 200, 500, 1e3,
                                       2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6};
const uint32_t ro__histo_size_nedges = sizeof ro__histo_size_edges / sizeof ro__histo_size_edges[0];

void ro__histo_init(ro_histo_t *h, const double *edges, uint32_t nedges)
{
    memset(h, 0, sizeof *h);
    h->edges = edges;
    h->nedges = nedges < RO_HISTO_MAX_EDGES ? nedges : RO_HISTO_MAX_EDGES;
}

void ro__histo_reset(ro_histo_t *h)
{
    ro__histo_init(h, h->edges, h->nedges);
}

/* The bucket of v: the first edge >= v (binary search); nedges: above
 * them all. */
static uint32_t bucket_of(const double *edges, uint32_t nedges, double v)
{
    uint32_t lo = 0, hi = nedges;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (edges[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void ro__histo_add(ro_histo_t *h, double v)
{
    if (!isfinite(v)) {
        h->skipped++;
        return;
    }
    h->count[bucket_of(h->edges, h->nedges, v)]++;
    if (h->n == 0 || v < h->min)
        h->min = v;
    if (h->n == 0 || v > h->max)
        h->max = v;
    h->n++;
    h->sum += v;
    h->sum_sq += v * v;
}

void ro__histo_merge(ro_histo_t *into, const ro_histo_t *from)
{
    if (from->n) {
        if (into->n == 0 || from->min < into->min)
            into->min = from->min;
        if (into->n == 0 || from->max > into->max)
            into->max = from->max;
    }
    for (uint32_t i = 0; i <= into->nedges; i++)
        into->count[i] += from->count[i];
    into->n += from->n;
    into->skipped += from->skipped;
    into->sum += from->sum;
    into->sum_sq += from->sum_sq;
}

/* Sets min and max to the outer edges of h's non-empty buckets (the open
 * end buckets: their one edge). */
static void bounds_from_buckets(ro_histo_t *h)
{
    uint32_t first = 0, last = h->nedges;
    while (first < last && h->count[first] == 0)
        first++;
    while (last > first && h->count[last] == 0)
        last--;
    if (h->n == 0 || h->nedges == 0) {
        h->min = h->max = 0;
        return;
    }
    h->min = h->edges[first > 0 ? first - 1 : 0];
    h->max = h->edges[last < h->nedges ? last : h->nedges - 1];
}

void ro__histo_sub(ro_histo_t *out, const ro_histo_t *a, const ro_histo_t *b)
{
    ro__histo_init(out, a->edges, a->nedges);
    for (uint32_t i = 0; i <= a->nedges; i++)
        out->count[i] = a->count[i] - b->count[i];
    out->n = a->n - b->n;
    out->skipped = a->skipped - b->skipped;
    out->sum = a->sum - b->sum;
    out->sum_sq = a->sum_sq - b->sum_sq;
    bounds_from_buckets(out);
}

void ro__histo_pub_init(ro_histo_pub_t *p, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        for (uint32_t i = 0; i <= RO_HISTO_MAX_EDGES; i++)
            atomic_init(&p[k].count[i], 0);
        atomic_init(&p[k].sum, 0.0);
        atomic_init(&p[k].sum_sq, 0.0);
    }
}

void ro__histo_pub_add(ro_histo_pub_t *p, const double *edges, uint32_t nedges, double v)
{
    if (!isfinite(v))
        return;
    /* Relaxed loads and stores: this thread is the only writer. */
    _Atomic uint64_t *c = &p->count[bucket_of(edges, nedges, v)];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&p->sum, atomic_load_explicit(&p->sum, memory_order_relaxed) + v,
                          memory_order_relaxed);
    atomic_store_explicit(&p->sum_sq,
                          atomic_load_explicit(&p->sum_sq, memory_order_relaxed) + v * v,
                          memory_order_relaxed);
}

void ro__histo_pub_read(ro_histo_t *h, const ro_histo_pub_t *p)
{
    /* Relaxed: statistics, no data behind them. */
    for (uint32_t i = 0; i <= h->nedges; i++) {
        uint64_t c = atomic_load_explicit(&p->count[i], memory_order_relaxed);
        h->count[i] += c;
        h->n += c;
    }
    h->sum += atomic_load_explicit(&p->sum, memory_order_relaxed);
    h->sum_sq += atomic_load_explicit(&p->sum_sq, memory_order_relaxed);
    bounds_from_buckets(h);
}
