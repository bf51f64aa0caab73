/* vec_pool.c: the vector engine's helper threads (vec_pool.h). */
#include "vecenv/vec_pool.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "runtime/cpu_relax.h"
#include "runtime/error.h"

/* How long a helper (and the owner, waiting for the last chunk) waits
 * before it sleeps: about a step of a tight loop, so such a loop never
 * pays a wake, and an idle pool sleeps soon. */
#define SPIN_NS 50000u
/* How much of that wait spins on the CPU; the rest yields it at each look,
 * so a thread the kernel has queued behind the waiter (on a loaded machine,
 * the pool's own other thread that holds the last chunk) runs meanwhile. A
 * yield with nothing else to run returns at once. */
#define PAUSE_NS 2000u

static void futex_wait(_Atomic uint32_t *word, uint32_t expect)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* spin_until_changed waits while *w == v for at most SPIN_NS, spinning
 * for PAUSE_NS and then yielding the CPU between looks; returns the last
 * value read. Acquire, as every read of a published word. */
static uint32_t spin_until_changed(_Atomic uint32_t *w, uint32_t v)
{
    uint64_t t0 = 0;
    bool yielding = false;
    for (uint32_t i = 0;; i++) {
        uint32_t x = atomic_load_explicit(w, memory_order_acquire);
        if (x != v)
            return x;
        if (yielding || (i & 15) == 15) { /* the clock, not at every look */
            uint64_t now = ro__now_ns();
            if (!t0)
                t0 = now;
            else if (now - t0 > SPIN_NS)
                return x;
            yielding = now - t0 > PAUSE_NS;
        }
        if (yielding)
            sched_yield();
        else
            ro__cpu_relax();
    }
}

/* A helper: its thread and its home range. */
struct ro_vec_helper {
    ro_vec_pool_t *pool;
    uint32_t home;
    pthread_t tid;
};

#define RANGE_WORD(g, next, end) (((uint64_t)(g) << 32) | ((uint64_t)(next) << 16) | (end))
_Static_assert(RO_VEC_POOL_MAX_CHUNKS <= 0xffffu &&
                   (RO_VEC_POOL_MAX + 1) * RO_VEC_POOL_CHUNKS <= RO_VEC_POOL_MAX_CHUNKS,
               "a range word's 16 bits hold every chunk index of a job");

/* claim takes the next chunk of range r if it belongs to job g: its index
 * in *c, true; false once the range has none left (or is another job's). */
static bool claim(ro_vec_range_t *r, uint32_t g, uint32_t *c)
{
    /* Acquire: a word of job g orders our reads of the job after the
     * owner's writes of it (its release of the word). */
    uint64_t w = atomic_load_explicit(&r->w, memory_order_acquire);
    for (;;) {
        const uint32_t next = (uint32_t)(w >> 16) & 0xffffu, end = (uint32_t)w & 0xffffu;
        if ((uint32_t)(w >> 32) != g || next >= end)
            return false;
        /* Acquire as above; the claim itself needs no more: only its
         * claimer runs the chunk, and done publishes what it wrote. */
        if (atomic_compare_exchange_weak_explicit(&r->w, &w, w + (1u << 16), memory_order_acquire,
                                                  memory_order_acquire)) {
            *c = next;
            return true;
        }
    }
}

/* chunk_done counts a chunk (or an item of a job in parts) done, of
 * `total`; the last wakes the owner if it sleeps. Release: the chunk's
 * writes before the owner's acquire of done reaching the total; seq_cst
 * against owner_waits (the wake). The total is read from the pool, not
 * kept: the owner may post no other job before this increment. */
static void chunk_done(ro_vec_pool_t *p, uint32_t total)
{
    if (atomic_fetch_add_explicit(&p->done, 1, memory_order_seq_cst) + 1 == total &&
        atomic_load_explicit(&p->owner_waits, memory_order_seq_cst))
        futex_wake(&p->done, 1);
}

/* work runs chunks of job g, those of range `home` first, then what the
 * other ranges have left, until none is left. */
static void work(ro_vec_pool_t *p, uint32_t g, uint32_t home)
{
    const uint32_t threads = p->helpers + 1;
    for (uint32_t k = 0; k < threads; k++) {
        ro_vec_range_t *r = &p->ranges[(home + k) % threads];
        uint32_t c;
        while (claim(r, g, &c)) {
            /* Relaxed: the claim's acquire ordered these after the job's
             * publication, and the job cannot change before this chunk is
             * done. */
            ro_vec_task_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
            void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
            const uint32_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
            const uint32_t chunk = atomic_load_explicit(&p->chunk, memory_order_relaxed);
            const uint32_t b = c * chunk, e = b + chunk < n ? b + chunk : n;
            fn(ctx, b, e);
            chunk_done(p, (n + chunk - 1) / chunk);
        }
    }
}

#define ITEM_DONE (1ull << 31)
#define ITEM_BUSY (1ull << 30)
#define ITEM_PART 0x3fffffffull
/* The most items a thread runs a part of in turn. */
#define WINDOW 2u
_Static_assert(RO_VEC_POOL_MAX_ITEMS <= RO_VEC_POOL_MAX_CHUNKS,
               "a range word's 16 bits hold every item index of a job in parts");

enum { PART_RAN, PART_LAST, PART_BUSY, PART_GONE };

/* run_part runs item i's next part if it is of job g and no thread runs
 * one now: PART_RAN (parts remain), PART_LAST (it was the last), PART_BUSY
 * (another thread runs one), PART_GONE (done, or another job's). */
static int run_part(ro_vec_pool_t *p, uint32_t g, uint32_t i)
{
    ro_vec_item_t *it = &p->items[i];
    /* Acquire: the previous part's writes (its release below) and the
     * job's fields (the owner's release of the ranges, then of the job's
     * generation) before this part reads them. */
    uint64_t w = atomic_load_explicit(&it->w, memory_order_acquire);
    do {
        if ((uint32_t)(w >> 32) != g || (w & ITEM_DONE))
            return PART_GONE;
        if (w & ITEM_BUSY)
            return PART_BUSY;
    } while (!atomic_compare_exchange_weak_explicit(&it->w, &w, w | ITEM_BUSY, memory_order_acquire,
                                                    memory_order_acquire));
    /* Relaxed: ordered by the take; the job cannot change before this item
     * is done. */
    ro_vec_part_fn fn = atomic_load_explicit(&p->part_fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
    const uint32_t part = (uint32_t)(w & ITEM_PART);
    const bool more = fn(ctx, i, part);
    /* Release: this part's writes before the next part's take. */
    atomic_store_explicit(&it->w, ((uint64_t)g << 32) | (more ? part + 1u : ITEM_DONE),
                          memory_order_release);
    if (more)
        return PART_RAN;
    chunk_done(p, atomic_load_explicit(&p->n, memory_order_relaxed));
    return PART_LAST;
}

/* steal finds an item of job g that a thread has taken from a range (it
 * may have started it), that is not done and that no thread runs now: true
 * with it in *i. */
static bool steal(ro_vec_pool_t *p, uint32_t g, uint32_t *i)
{
    const uint32_t threads = p->helpers + 1;
    const uint32_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    for (uint32_t r = 0; r < threads; r++) {
        /* Acquire, as claim's. A word of another job: this one is over. */
        const uint64_t w = atomic_load_explicit(&p->ranges[r].w, memory_order_acquire);
        if ((uint32_t)(w >> 32) != g)
            return false;
        const uint32_t next = (uint32_t)(w >> 16) & 0xffffu;
        for (uint32_t j = next; j-- > r * n / threads;) {
            /* Relaxed: a hint; run_part takes it, or finds it gone. */
            const uint64_t x = atomic_load_explicit(&p->items[j].w, memory_order_relaxed);
            if ((uint32_t)(x >> 32) == g && !(x & (ITEM_DONE | ITEM_BUSY))) {
                *i = j;
                return true;
            }
        }
    }
    return false;
}

/*
 * work_parts runs parts of job g (ro__vec_pool_run_parts): a window of
 * items from range `home` first, then from the other ranges, one part of
 * each in turn; once no range has any left, one item at a time that
 * another thread has taken and is not running; until there is none.
 *
 * An item leaves a window when it is done, or when another thread runs a
 * part of it: that thread has it in its own window (only a window's items
 * are run) and goes on with it, so every item not done stays in the window
 * of the thread that ran it last, and no thread spins on an item another
 * holds.
 */
static void work_parts(ro_vec_pool_t *p, uint32_t g, uint32_t home)
{
    const uint32_t threads = p->helpers + 1;
    uint32_t win[WINDOW], nw = 0, k = 0;
    for (;;) {
        while (nw < WINDOW && k < threads)
            if (!claim(&p->ranges[(home + k) % threads], g, &win[nw]))
                k++;
            else
                nw++;
        if (nw == 0) {
            if (!steal(p, g, &win[0]))
                return;
            nw = 1;
        }
        for (uint32_t j = 0; j < nw;)
            if (run_part(p, g, win[j]) == PART_RAN)
                j++;
            else /* done, or another thread's now */
                win[j] = win[--nw];
    }
}

/* run_job runs the chunks or parts of job g that this thread can take. */
static void run_job(ro_vec_pool_t *p, uint32_t g, uint32_t home)
{
    /* Relaxed: written before the job's generation, read after it; a stale
     * value is of a job that is over, whose claims and items fail. */
    if (atomic_load_explicit(&p->in_parts, memory_order_relaxed))
        work_parts(p, g, home);
    else
        work(p, g, home);
}

static void *helper_main(void *arg)
{
    struct ro_vec_helper *h = arg;
    ro_vec_pool_t *p = h->pool;
    uint32_t seen = 0; /* gen was 0 when the pool started, before this thread */
    for (;;) {
        uint32_t g = spin_until_changed(&p->gen, seen);
        if (g == seen) {
            /* Eventcount: announce the sleep, look again, sleep. Seq_cst
             * with the owner's increment of gen and read of sleepers:
             * either it sees us and wakes us, or we see its new gen. */
            atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&p->gen, memory_order_seq_cst) == seen)
                futex_wait(&p->gen, seen);
            atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
            continue;
        }
        seen = g;
        /* Relaxed: stop is written before gen's increment, read after. */
        if (atomic_load_explicit(&p->stop, memory_order_relaxed))
            return NULL;
        run_job(p, g, h->home);
    }
}

int ro__vec_pool_start(ro_vec_pool_t *p, uint32_t helpers, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (helpers > RO_VEC_POOL_MAX)
        helpers = RO_VEC_POOL_MAX;
    if (!helpers)
        return 0;
    p->hs = calloc(helpers, sizeof *p->hs);
    p->ranges = ro__calloc_lines(helpers + 1, sizeof *p->ranges);
    if (!p->hs || !p->ranges) {
        ro__vec_pool_stop(p);
        return ro__errorf(err, errlen, RO_ENOMEM, "vector engine: out of memory for threads");
    }
    for (uint32_t i = 0; i < helpers; i++) {
        p->hs[i] = (struct ro_vec_helper){.pool = p, .home = i + 1};
        int rc = pthread_create(&p->hs[i].tid, NULL, helper_main, &p->hs[i]);
        if (rc) {
            ro__vec_pool_stop(p);
            return ro__errorf(err, errlen, RO_EIO, "vector engine: cannot start thread %u: %s",
                              i + 1, strerror(rc));
        }
        p->helpers = i + 1;
    }
    return 0;
}

uint32_t ro__vec_pool_chunk(uint32_t n, uint32_t threads, double item_ns)
{
    if (!threads)
        threads = 1;
    const uint64_t parts = (uint64_t)threads * RO_VEC_POOL_CHUNKS;
    uint64_t chunk = (n + parts - 1) / parts;
    if (item_ns > 0) {
        /* Items worth RO_VEC_POOL_CHUNK_NS; at least one. */
        const double worth = RO_VEC_POOL_CHUNK_NS / item_ns;
        const uint64_t cap = worth < 1.0 ? 1 : (uint64_t)worth;
        if (cap < chunk)
            chunk = cap;
    }
    const uint64_t least = ((uint64_t)n + RO_VEC_POOL_MAX_CHUNKS - 1) / RO_VEC_POOL_MAX_CHUNKS;
    if (chunk < least)
        chunk = least;
    return chunk ? (uint32_t)chunk : 1;
}

void ro__vec_pool_set_cost(ro_vec_pool_t *p, double item_ns)
{
    p->item_ns = item_ns > 0 ? item_ns : 0;
}

/* publish opens the job whose fields the owner has written, of nchunks
 * chunks (items of a job in parts): each thread's home range, then the new
 * generation, waking sleeping helpers. */
static void publish(ro_vec_pool_t *p, uint32_t nchunks)
{
    const uint32_t threads = p->helpers + 1;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    /* Thread k's home: chunks [k nchunks / threads, (k + 1) nchunks /
     * threads), the same for every job over n. Release: the job's fields
     * before each range's word. */
    for (uint32_t k = 0; k < threads; k++)
        atomic_store_explicit(&p->ranges[k].w,
                              RANGE_WORD(g, k * nchunks / threads, (k + 1) * nchunks / threads),
                              memory_order_release);
    atomic_store_explicit(&p->gen, g, memory_order_seq_cst);
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst))
        futex_wake(&p->gen, INT_MAX);
    p->job_gen = g;
    p->job_chunks = nchunks;
    p->job_open = true;
}

void ro__vec_pool_post(ro_vec_pool_t *p, ro_vec_task_fn fn, void *ctx, uint32_t n)
{
    ro__vec_pool_wait(p); /* one job at a time */
    const uint32_t threads = p->helpers + 1;
    if (threads == 1 || n < 2) {
        fn(ctx, 0, n); /* nothing to hand over: done before it returns */
        return;
    }
    /* At most RO_VEC_POOL_MAX_CHUNKS chunks (the range words hold their
     * indices). */
    const uint32_t chunk = ro__vec_pool_chunk(n, threads, p->item_ns);
    /* Relaxed: published by the release of the ranges (publish). */
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&p->in_parts, false, memory_order_relaxed);
    publish(p, (n + chunk - 1) / chunk);
}

int ro__vec_pool_reserve_parts(ro_vec_pool_t *p, uint32_t n, char *err, size_t errlen)
{
    /* Once: a helper that has run a job's last part may still be looking
     * through the items for one to take (and finds none) after the job is
     * done, so they are never freed before the pool stops. */
    if (p->items)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "vector engine: items for jobs in parts already reserved");
    if (n > RO_VEC_POOL_MAX_ITEMS)
        n = RO_VEC_POOL_MAX_ITEMS;
    p->items = ro__calloc_lines(n ? n : 1, sizeof *p->items);
    if (!p->items)
        return ro__errorf(err, errlen, RO_ENOMEM, "vector engine: out of memory for %u items", n);
    p->items_cap = n;
    return 0;
}

void ro__vec_pool_run_parts(ro_vec_pool_t *p, ro_vec_part_fn fn, void *ctx, uint32_t n)
{
    ro__vec_pool_wait(p); /* one job at a time */
    if (p->helpers == 0 || n < 2 || n > p->items_cap) {
        /* Alone: each item's parts in a row. */
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t part = 0; fn(ctx, i, part); part++)
                continue;
        return;
    }
    /* Relaxed: published by the release of the ranges (publish), as the
     * items' first words. */
    atomic_store_explicit(&p->part_fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->chunk, 1, memory_order_relaxed);
    atomic_store_explicit(&p->in_parts, true, memory_order_relaxed);
    const uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    for (uint32_t i = 0; i < n; i++)
        atomic_store_explicit(&p->items[i].w, (uint64_t)g << 32, memory_order_relaxed);
    publish(p, n);
    ro__vec_pool_wait(p);
}

bool ro__vec_pool_busy(const ro_vec_pool_t *p)
{
    /* Acquire, as the wait's: a job seen done is done in memory too. */
    return p->job_open && atomic_load_explicit(&p->done, memory_order_acquire) != p->job_chunks;
}

void ro__vec_pool_wait(ro_vec_pool_t *p)
{
    if (!p->job_open)
        return;
    const uint32_t nchunks = p->job_chunks;
    run_job(p, p->job_gen, 0); /* its home range, then what no helper took yet */
    /* Acquire: every chunk's writes before its increment of done. */
    uint32_t d;
    while ((d = atomic_load_explicit(&p->done, memory_order_acquire)) != nchunks) {
        if (spin_until_changed(&p->done, d) != d)
            continue;
        /* Seq_cst with the last chunk's increment and read of owner_waits:
         * either it wakes us, or we see done at nchunks. */
        atomic_store_explicit(&p->owner_waits, 1, memory_order_seq_cst);
        d = atomic_load_explicit(&p->done, memory_order_seq_cst);
        if (d != nchunks)
            futex_wait(&p->done, d);
        atomic_store_explicit(&p->owner_waits, 0, memory_order_relaxed);
    }
    p->job_open = false;
}

void ro__vec_pool_run(ro_vec_pool_t *p, ro_vec_task_fn fn, void *ctx, uint32_t n)
{
    ro__vec_pool_post(p, fn, ctx, n);
    ro__vec_pool_wait(p);
}

void ro__vec_pool_stop(ro_vec_pool_t *p)
{
    ro__vec_pool_wait(p);
    if (p->helpers) {
        atomic_store_explicit(&p->stop, true, memory_order_relaxed);
        /* Seq_cst, as a job's publication: stop before the new gen. */
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);
        futex_wake(&p->gen, INT_MAX);
        for (uint32_t i = 0; i < p->helpers; i++)
            pthread_join(p->hs[i].tid, NULL);
    }
    free(p->hs);
    free(p->ranges);
    free(p->items);
    memset(p, 0, sizeof *p);
}
