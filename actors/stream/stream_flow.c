#include "actors/stream/stream_flow.h"

#include <stdio.h>
#include <stdlib.h>

#include "actors/stream/segment_codec.h"
#include "runtime/clock.h"
#include "runtime/error.h"

void ro__sflow_init(ro_sflow_t *f, uint32_t window, uint32_t max_lag)
{
    f->pending_head = f->sent_head = NULL;
    f->pending_tail = &f->pending_head;
    f->sent_tail = &f->sent_head;
    f->pending = f->sent = 0;
    f->window = window ? window : 1;
    f->max_lag = max_lag;
    f->next_seq = 1;
    f->shm = NULL;
}

static void held(ro_sflow_stats_t *st, const ro_segment_t *s, int d)
{
    if (st->held)
        st->held[s->shard] += (uint32_t)d;
}

void ro__sflow_push(ro_sflow_t *f, ro_segment_t *s, ro_sflow_stats_t *st)
{
    held(st, s, 1);
    s->next = NULL;
    *f->pending_tail = s;
    f->pending_tail = &s->next;
    f->pending++;
}

static ro_segment_t *pop_pending(ro_sflow_t *f)
{
    ro_segment_t *s = f->pending_head;
    f->pending_head = s->next;
    if (!f->pending_head)
        f->pending_tail = &f->pending_head;
    f->pending--;
    s->next = NULL;
    return s;
}

/* A write of a segment's frame: its scratch, freed when written. */
typedef struct seg_write {
    ro_segment_t *seg;
    ro_seg_wire_t wire;
} seg_write_t;

static void on_written(void *ctx, int status)
{
    seg_write_t *w = ctx;
    ro_segment_t *s = w->seg;
    (void)status; /* a failed write shows up as the session's close */
    free(w);
    /* libuv calls back a loop turn after the bytes went to the kernel: an
     * ack (read in that turn) may come first. */
    if (--s->writing == 0 && s->acked) {
        s->next = NULL;
        ro__seg_pool_give(s->pool, s);
    }
}

int ro__sflow_send(ro_sflow_t *f, ro_conn_t *c, uint64_t version_now, ro_segment_t **dropped,
                   ro_sflow_stats_t *st)
{
    while (f->pending_head && f->sent < f->window) {
        ro_segment_t *s = pop_pending(f);
        uint64_t lag = version_now > s->version_min ? version_now - s->version_min : 0;
        if (f->max_lag && lag > f->max_lag) {
            held(st, s, -1);
            s->next = *dropped;
            *dropped = s;
            st->dropped_lag++;
            continue;
        }
        st->lag_sum += lag;
        st->lag_min = st->lag_count == 0 || lag < st->lag_min ? lag : st->lag_min;
        st->lag_max = lag > st->lag_max ? lag : st->lag_max;
        st->lag_count++;
        s->conn_seq = f->next_seq++;
        s->sent_ns = ro__now_ns();
        *f->sent_tail = s;
        f->sent_tail = &s->next;
        f->sent++;
        st->sent++;
        st->transitions_sent += (uint64_t)s->t * s->n;
        seg_write_t *w = malloc(sizeof *w);
        if (!w)
            return RO_ENOMEM;
        w->seg = s;
        ro__seg_wire_build(&w->wire, s, s->conn_seq, f->shm ? f->shm->base : NULL);
        int rc = ro__conn_send_bufs(c, w->wire.bufs, w->wire.nbufs, on_written, w);
        if (rc) {
            free(w);
            return rc;
        }
        s->writing++;
    }
    return 0;
}

int ro__sflow_ack(ro_sflow_t *f, uint64_t seq, ro_sflow_stats_t *st, char *err, size_t errlen)
{
    if (seq >= f->next_seq)
        return ro__errorf(err, errlen, RO_EPROTO, "ack for segment %llu, which was never sent",
                          (unsigned long long)seq);
    ro_segment_t *freed = NULL;
    while (f->sent_head && f->sent_head->conn_seq <= seq) {
        ro_segment_t *s = f->sent_head;
        f->sent_head = s->next;
        f->sent--;
        held(st, s, -1);
        st->acked++;
        st->transitions_acked += (uint64_t)s->t * s->n;
        if (s->writing) { /* freed once written (on_written) */
            s->acked = true;
            continue;
        }
        s->next = freed;
        freed = s;
    }
    if (!f->sent_head)
        f->sent_tail = &f->sent_head;
    if (freed)
        ro__seg_pool_give(freed->pool, freed); /* waiting shards go on */
    return 0;
}

ro_segment_t *ro__sflow_reclaim(ro_sflow_t *f, uint64_t *resent, ro_sflow_stats_t *st)
{
    ro_segment_t *all = f->sent_head;
    *resent = f->sent;
    *f->sent_tail = f->pending_head; /* sent ones first, in order */
    if (!all)
        all = f->pending_head;
    f->pending_head = f->sent_head = NULL;
    f->pending_tail = &f->pending_head;
    f->sent_tail = &f->sent_head;
    f->pending = f->sent = 0;
    for (ro_segment_t *s = all; s; s = s->next) {
        held(st, s, -1);
        s->conn_seq = 0;
    }
    return all;
}

uint64_t ro__sflow_oldest_sent_ns(const ro_sflow_t *f)
{
    return f->sent_head ? f->sent_head->sent_ns : 0;
}
