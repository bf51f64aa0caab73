/*
 * libFuzzer entry point for the hello handshake (-Dfuzz=true, clang): the
 * gate (src/wire/gate.c), the frame reader's limits and budget
 * (src/wire/frame.c) and the first-frame check (src/wire/checks.c), driven
 * as a node drives them, by a script the fuzzer writes:
 *
 *   op 0: a peer connects (the gate admits it; the one it names is dropped)
 *   op 1: peer k sends n bytes (read in chunks as a connection reads them;
 *         each frame decoded: before hello it must be a hello that checks
 *         out, after it actions or a goodbye; anything else drops the peer)
 *   op 2: time passes (the expired ones are dropped, oldest first)
 *   op 3: peer k goes away
 *
 * Invariants (abort on a breach): at most `slots` peers wait; the gate
 * never names a peer that said hello; a waiting peer's limit is
 * RO_HELLO_MAX_FRAME and its buffer stays small; the shared budget is never
 * exceeded; decoding never holds more than its allocator allows.
 *
 *     build-fuzz/tests/fuzz/fuzz_handshake -max_len=1048576 -rss_limit_mb=2048 CORPUS/
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/checks.h"
#include "wire/conn.h"
#include "wire/frame.h"
#include "wire/gate.h"
#include "wire/pb_alloc.h"
#include "wire/varint.h"

#define PEERS 24
#define AFTER_HELLO_MAX (64u << 10)

typedef struct peer {
    ro_conn_t c;
    bool used, attached;
} peer_t;

static peer_t peers[PEERS];
static volatile int32_t sink; /* what passing frames held: every value read */
static ro_gate_t gate;
static ro_frame_budget_t budget;
static ro_pb_alloc_t alloc;
static uint64_t now;

static void drop(peer_t *p)
{
    if (!p->used)
        return;
    ro__gate_leave(&gate, &p->c);
    ro__frame_reader_free(&p->c.rd);
    p->used = p->attached = false;
}

static void check_gate(void)
{
    if (gate.waiting > gate.slots)
        abort();
    for (ro_conn_t *c = ro__gate_first(&gate); c; c = ro__gate_next(c)) {
        peer_t *p = (peer_t *)c; /* c is the first field */
        if (!p->used || p->attached || c->rd.max_frame != RO_HELLO_MAX_FRAME)
            abort();
        /* one hello, its prefix and one read of at most the same */
        if (c->rd.cap > 4 * (RO_HELLO_MAX_FRAME + RO_VARINT_MAX))
            abort();
    }
    if (budget.used > budget.limit || alloc.used > alloc.limit)
        abort();
}

static void connect_peer(void)
{
    for (int i = 0; i < PEERS; i++) {
        peer_t *p = &peers[i];
        if (p->used)
            continue;
        memset(&p->c, 0, sizeof p->c);
        if (ro__frame_reader_init(&p->c.rd, 16u << 20, &alloc) != 0)
            return;
        ro__frame_reader_set_budget(&p->c.rd, &budget);
        p->used = true;
        ro_conn_t *victim = ro__gate_admit(&gate, &p->c, now);
        if (victim) {
            if (!victim->gated || ((peer_t *)victim)->attached)
                abort();
            drop((peer_t *)victim);
        }
        return;
    }
}

/* A frame from p: the node's rules. Returns false to drop p. */
static bool on_frame(peer_t *p, const ro_frame_t *f)
{
    char err[256];
    bool trainer;
    ro_hello_rules_t rules = {.learners = true, .token = "s3cret"};
    if (!p->attached) {
        if (ro__check_first_frame(f, &rules, &trainer, err, sizeof err) != 0)
            return false;
        ro__gate_pass(&gate, &p->c, AFTER_HELLO_MAX);
        p->attached = true;
        return true;
    }
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_ACTIONS) {
        static const ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = 3};
        const Rollout__V1__Actions *a = f->actions;
        if (ro__check_actions(a, a->n_discrete, &act, err, sizeof err) != 0)
            return false;
        for (size_t i = 0; i < a->n_discrete; i++)
            sink += a->discrete[i]; /* read it all: ASan checks the lengths */
        return true;
    }
    return false; /* a goodbye closes; anything else breaks the rules */
}

static void send_bytes(peer_t *p, const uint8_t *data, size_t n)
{
    while (n > 0 && p->used) {
        /* As conn.c reads: one chunk, no more than one frame's worth while
         * the peer is held to small frames. */
        size_t chunk = RO_CONN_READ_CHUNK;
        if (p->c.rd.max_frame + RO_VARINT_MAX < chunk)
            chunk = p->c.rd.max_frame + RO_VARINT_MAX;
        uint8_t *to = ro__frame_reader_space(&p->c.rd, chunk);
        if (!to) {
            drop(p); /* over the budget, or out of memory: closed */
            return;
        }
        size_t k = n < chunk ? n : chunk;
        memcpy(to, data, k);
        ro__frame_reader_commit(&p->c.rd, k);
        data += k;
        n -= k;
        for (;;) {
            ro_frame_t *f = NULL;
            char err[256];
            /* Before its hello, as the connection reads it (wire/conn.c):
             * strings cut at a NUL are refused from the bytes. */
            const uint8_t *body;
            size_t blen;
            if (ro__frame_reader_peek(&p->c.rd, &body, &blen, err, sizeof err) > 0 &&
                ro__check_hello_bytes(body, blen, err, sizeof err) != 0) {
                drop(p);
                return;
            }
            int rc = ro__frame_reader_next(&p->c.rd, &f, err, sizeof err);
            if (rc == 0)
                break;
            bool keep = rc > 0 && on_frame(p, f);
            if (f)
                ro__frame_free(&alloc, f);
            if (!keep) {
                drop(p);
                return;
            }
            check_gate();
        }
        check_gate();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(peers, 0, sizeof peers);
    ro__gate_init(&gate, 2, 5.0); /* RO_GATE_MIN_SLOTS slots */
    budget = (ro_frame_budget_t){.limit = 2 * AFTER_HELLO_MAX};
    ro__pb_alloc_init(&alloc, 4 * AFTER_HELLO_MAX + (1u << 20));
    now = 1;
    size_t i = 0;
    while (i < size) {
        uint8_t op = data[i++] % 4;
        uint8_t k = i < size ? data[i++] % PEERS : 0;
        if (op == 0) {
            connect_peer();
        } else if (op == 1 && peers[k].used) {
            size_t n = i + 1 < size ? (size_t)data[i] | (size_t)data[i + 1] << 8 : 0;
            i += 2;
            if (n > size - (i < size ? i : size))
                n = i < size ? size - i : 0;
            send_bytes(&peers[k], data + i, n);
            i += n;
        } else if (op == 2) {
            now += (uint64_t)k * 250000000ull;
            for (ro_conn_t *c; (c = ro__gate_expired(&gate, now));)
                drop((peer_t *)c);
        } else if (op == 3) {
            drop(&peers[k]);
        }
        check_gate();
    }
    for (int p = 0; p < PEERS; p++)
        drop(&peers[p]);
    if (gate.waiting || budget.used || alloc.used)
        abort(); /* everything given back */
    return 0;
}
