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

void ro__histo_add(ro_histo_t *h, double v)
{
    if (!isfinite(v)) {
        h->skipped++;
        return;
    }
    /* The first edge >= v (binary search); nedges: above them all. */
    uint32_t lo = 0, hi = h->nedges;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (h->edges[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    h->count[lo]++;
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
