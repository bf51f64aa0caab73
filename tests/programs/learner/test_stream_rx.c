/* rollout-learner's accounting of a stream node's segments
 * (programs/learner/stream_rx.c), on Segment frames packed here with
 * protobuf-c: steps, episodes and their returns per env (an episode
 * running across segments), each shard's segments in order (one sent
 * again counted once and acknowledged, missing ones counted as gaps),
 * versions, a restarted node's episodes forgotten, other frames left to
 * the decoder, and segments that break the rules refused by name; then
 * segments whose bytes lie in the node's memory (a memfd here): counted,
 * and a non-finite reward there refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learner/stream_rx.h"
#include "rollout.pb-c.h"
#include "runtime/error.h"

#define ERRLEN 256
#define T_ 2
#define N_ 2
#define OD 2
#define ENVS 4
#define FRAME_MAX 4096

enum { OBS, ACT, LOGP, REW, TERM, TRUNC, FIRST, EPI, STEP, PV, NEXT, NT };

/* One segment of T_ steps of N_ envs, ABI 1, discrete actions. */
typedef struct seg {
    Rollout__V1__Frame frame;
    Rollout__V1__Segment seg;
    Rollout__V1__NamedTensor nt[NT];
    Rollout__V1__NamedTensor *ptrs[NT];
    uint32_t shapes[NT][3];
    float obs[T_ * N_ * OD], next[N_ * OD], logp[T_ * N_], reward[T_ * N_];
    int32_t act[T_ * N_];
    uint8_t term[T_ * N_], trunc[T_ * N_], first[T_ * N_];
    uint32_t u32[T_ * N_];
    uint64_t pv[T_];
    uint8_t buf[FRAME_MAX];
    size_t len;
} seg_t;

static const ro_segment_rules_t rules = {
    .unroll = 4, .num_envs = ENVS, .obs_dim = OD, .act_dim = 1, .discrete = true};

static void tensor(seg_t *s, int i, const char *name, uint32_t dtype, void *data, size_t bytes,
                   uint32_t ndim, uint32_t d0, uint32_t d1, uint32_t d2)
{
    Rollout__V1__NamedTensor *t = &s->nt[i];
    *t = (Rollout__V1__NamedTensor)ROLLOUT__V1__NAMED_TENSOR__INIT;
    t->name = (char *)name;
    t->dtype = (Rollout__V1__DType)dtype;
    s->shapes[i][0] = d0;
    s->shapes[i][1] = d1;
    s->shapes[i][2] = d2;
    t->n_shape = ndim;
    t->shape = s->shapes[i];
    t->data.data = data;
    t->data.len = bytes;
    s->ptrs[i] = t;
}

/* seg_init: segment seq of shard (its shard_seq), envs first_env..+N_,
 * versions v..v+1, no episode ending; rewards r[t][e] = base + 10 t + e. */
static void seg_init(seg_t *s, uint64_t seq, uint32_t shard, uint64_t shard_seq, uint32_t first_env,
                     uint64_t v, float base)
{
    memset(s, 0, sizeof *s);
    for (uint32_t t = 0; t < T_; t++)
        for (uint32_t e = 0; e < N_; e++)
            s->reward[t * N_ + e] = base + 10.0f * (float)t + (float)e;
    s->pv[0] = v;
    s->pv[1] = v + 1;
    tensor(s, OBS, "obs", 1, s->obs, sizeof s->obs, 3, T_, N_, OD);
    tensor(s, ACT, "action", 2, s->act, sizeof s->act, 2, T_, N_, 0);
    tensor(s, LOGP, "logp", 1, s->logp, sizeof s->logp, 2, T_, N_, 0);
    tensor(s, REW, "reward", 1, s->reward, sizeof s->reward, 2, T_, N_, 0);
    tensor(s, TERM, "terminated", 3, s->term, sizeof s->term, 2, T_, N_, 0);
    tensor(s, TRUNC, "truncated", 3, s->trunc, sizeof s->trunc, 2, T_, N_, 0);
    tensor(s, FIRST, "is_first", 3, s->first, sizeof s->first, 2, T_, N_, 0);
    tensor(s, EPI, "episode", 4, s->u32, sizeof s->u32, 2, T_, N_, 0);
    tensor(s, STEP, "step", 4, s->u32, sizeof s->u32, 2, T_, N_, 0);
    tensor(s, PV, "policy_version", 5, s->pv, sizeof s->pv, 1, T_, 0, 0);
    tensor(s, NEXT, "next_obs", 1, s->next, sizeof s->next, 2, N_, OD, 0);
    s->seg = (Rollout__V1__Segment)ROLLOUT__V1__SEGMENT__INIT;
    s->seg.seq = seq;
    s->seg.shard = shard;
    s->seg.shard_seq = shard_seq;
    s->seg.first_env = first_env;
    s->seg.t = T_;
    s->seg.n = N_;
    s->seg.policy_version_min = v;
    s->seg.policy_version_max = v + 1;
    s->seg.n_tensors = NT;
    s->seg.tensors = s->ptrs;
    s->frame = (Rollout__V1__Frame)ROLLOUT__V1__FRAME__INIT;
    s->frame.body_case = ROLLOUT__V1__FRAME__BODY_SEGMENT;
    s->frame.segment = &s->seg;
}

/* take: pack s and hand it to rx; the code, *ack and err as it left them. */
static int take(ro_stream_rx_t *rx, seg_t *s, uint64_t *ack, char *err)
{
    assert_true(rollout__v1__frame__get_packed_size(&s->frame) <= FRAME_MAX);
    s->len = rollout__v1__frame__pack(&s->frame, s->buf);
    err[0] = '\0';
    *ack = 0;
    int rc = ro__stream_rx_frame(rx, s->buf, s->len, ack, err, ERRLEN);
    if (rc < 0) {
        assert_true(err[0] != '\0');
        assert_null(strchr(err, '\n'));
    }
    return rc;
}

/* Steps, episodes and returns; an episode that spans two segments has the
 * return of all its steps; a truncation ends one as a termination does. */
static void test_accounting(void **state)
{
    (void)state;
    ro_stream_rx_t rx;
    assert_int_equal(ro__stream_rx_init(&rx, &rules), 0);
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    char err[ERRLEN];
    uint64_t ack;

    /* Envs 2 and 3 (shard 1); env 2's episode ends at step 1. */
    seg_init(s, 1, 1, 0, 2, 5, 1.0f);
    s->term[1 * N_ + 0] = 1;
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(ack, 1);
    assert_int_equal(rx.steps, T_ * N_);
    assert_int_equal(rx.segments, 1);
    assert_int_equal(rx.episodes, 1);
    assert_true(rx.return_sum == 1.0 + 11.0); /* env 2: steps 0 and 1 */
    assert_int_equal(rx.version_min, 5);
    assert_int_equal(rx.version_max, 6);

    /* The next segment: env 3's episode (running since the first) ends
     * by truncation at step 0; env 2's new one runs on. */
    seg_init(s, 2, 1, 1, 2, 7, 100.0f);
    s->trunc[0 * N_ + 1] = 1;
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(ack, 2);
    assert_int_equal(rx.episodes, 2);
    /* env 3: 2 + 12 from the first segment, 101 from this one. */
    assert_true(rx.return_sum == 12.0 + (2.0 + 12.0 + 101.0));
    assert_int_equal(rx.steps, 2 * T_ * N_);
    assert_int_equal(rx.version_min, 5);
    assert_int_equal(rx.version_max, 8);
    assert_int_equal(rx.duplicates, 0);
    assert_int_equal(rx.gaps, 0);
    assert_int_equal(rx.in_memory, 0);
    free(s);
    ro__stream_rx_free(&rx);
}

/* A shard's segment sent again (a reconnect lost its ack) is acknowledged
 * and counted once; segments missing between two are gaps; shards are
 * followed apart. */
static void test_duplicates_and_gaps(void **state)
{
    (void)state;
    ro_stream_rx_t rx;
    assert_int_equal(ro__stream_rx_init(&rx, &rules), 0);
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    char err[ERRLEN];
    uint64_t ack;
    seg_init(s, 1, 0, 0, 0, 1, 1.0f);
    assert_int_equal(take(&rx, s, &ack, err), 1);
    seg_init(s, 2, 0, 0, 0, 1, 1.0f); /* shard 0's segment 0 again */
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(ack, 2);
    assert_int_equal(rx.duplicates, 1);
    assert_int_equal(rx.segments, 1);
    assert_int_equal(rx.steps, T_ * N_);
    seg_init(s, 3, 0, 3, 0, 1, 1.0f); /* 1 and 2 never came */
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(rx.gaps, 2);
    assert_int_equal(rx.segments, 2);
    seg_init(s, 4, 2, 0, 2, 1, 1.0f); /* another shard starts at 0: no gap */
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(rx.gaps, 2);
    assert_int_equal(rx.segments, 3);
    seg_init(s, 5, 0, 2, 0, 1, 1.0f); /* behind shard 0's latest: a duplicate */
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(rx.duplicates, 2);
    assert_int_equal(rx.segments, 3);
    free(s);
    ro__stream_rx_free(&rx);
}

/* A restarted node (a new node id): the episodes in progress and the
 * shards' order are forgotten. */
static void test_restart(void **state)
{
    (void)state;
    ro_stream_rx_t rx;
    assert_int_equal(ro__stream_rx_init(&rx, &rules), 0);
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    char err[ERRLEN];
    uint64_t ack;
    seg_init(s, 1, 0, 0, 0, 1, 1000.0f);
    assert_int_equal(take(&rx, s, &ack, err), 1);
    ro__stream_rx_restart(&rx);
    seg_init(s, 1, 0, 0, 0, 1, 1.0f); /* shard_seq 0 again: new, not a duplicate */
    s->term[1 * N_ + 0] = 1;
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(rx.duplicates, 0);
    assert_int_equal(rx.episodes, 1);
    assert_true(rx.return_sum == 1.0 + 11.0); /* none of the 1000s before */
    free(s);
    ro__stream_rx_free(&rx);
}

/* A frame that is not a segment is left to the usual decoder. */
static void test_other_frames(void **state)
{
    (void)state;
    ro_stream_rx_t rx;
    assert_int_equal(ro__stream_rx_init(&rx, &rules), 0);
    Rollout__V1__Goodbye bye = ROLLOUT__V1__GOODBYE__INIT;
    bye.reason = "done";
    Rollout__V1__Frame f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &bye;
    uint8_t buf[256];
    size_t len = rollout__v1__frame__pack(&f, buf);
    char err[ERRLEN] = "";
    uint64_t ack = 99;
    assert_int_equal(ro__stream_rx_frame(&rx, buf, len, &ack, err, ERRLEN), 0);
    assert_int_equal(ack, 99);
    assert_int_equal(rx.segments, 0);
    ro__stream_rx_free(&rx);
}

/* Segments that break the rules are refused, naming what is wrong, and
 * change no count. */
static void test_refused(void **state)
{
    (void)state;
    ro_stream_rx_t rx;
    assert_int_equal(ro__stream_rx_init(&rx, &rules), 0);
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    char err[ERRLEN];
    uint64_t ack;
    seg_init(s, 1, ENVS, 0, 0, 1, 1.0f); /* a shard past the node's envs */
    assert_int_equal(take(&rx, s, &ack, err), RO_EPROTO);
    assert_non_null(strstr(err, "shard 4"));
    seg_init(s, 1, 0, 0, ENVS - 1, 1, 1.0f); /* envs 3 and 4 of 4 */
    assert_int_equal(take(&rx, s, &ack, err), RO_EPROTO);
    seg_init(s, 1, 0, 0, 0, 1, 1.0f);
    s->seg.n_tensors = REW; /* no reward and what follows */
    assert_int_equal(take(&rx, s, &ack, err), RO_EPROTO);
    assert_non_null(strstr(err, "reward"));
    s->seg.n_tensors = NT;
    s->len = rollout__v1__frame__pack(&s->frame, s->buf);
    assert_true(ro__stream_rx_frame(&rx, s->buf, s->len / 2, &ack, err, ERRLEN) < 0);
    assert_int_equal(rx.segments, 0);
    assert_int_equal(rx.steps, 0);
    assert_int_equal(rx.next_seq[0], 0);
    free(s);
    ro__stream_rx_free(&rx);
}

/* in_memory: s's tensors moved into shm (their data emptied, offsets set). */
static void move_to_memory(seg_t *s, ro_shared_mem_t *shm)
{
    size_t at = 0;
    for (int i = 0; i < NT; i++) {
        Rollout__V1__NamedTensor *t = &s->nt[i];
        at = (at + 7) & ~(size_t)7;
        assert_true(at + t->data.len <= shm->bytes);
        memcpy((uint8_t *)shm->base + at, t->data.data, t->data.len);
        t->offset = at;
        at += t->data.len;
        t->data.data = NULL;
        t->data.len = 0;
    }
    s->seg.in_memory = true;
}

/* Segments in the node's memory are read there and counted as such; a
 * NaN or infinite reward there (no node writes one) is refused by name. */
static void test_in_memory(void **state)
{
    (void)state;
    ro_stream_rx_t rx;
    assert_int_equal(ro__stream_rx_init(&rx, &rules), 0);
    char err[ERRLEN];
    assert_int_equal(ro__shared_mem_create(&rx.shm, "test-stream-rx", 4096, false, err, ERRLEN), 0);
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    uint64_t ack;
    seg_init(s, 1, 0, 0, 0, 1, 1.0f);
    s->term[1 * N_ + 1] = 1;
    move_to_memory(s, &rx.shm);
    assert_int_equal(take(&rx, s, &ack, err), 1);
    assert_int_equal(rx.in_memory, 1);
    assert_int_equal(rx.episodes, 1);
    assert_true(rx.return_sum == 2.0 + 12.0); /* env 1 */

    seg_init(s, 2, 0, 1, 0, 1, 1.0f);
    s->reward[1 * N_ + 1] = NAN;
    move_to_memory(s, &rx.shm);
    assert_int_equal(take(&rx, s, &ack, err), RO_ERANGE);
    assert_non_null(strstr(err, "NaN"));
    seg_init(s, 3, 0, 1, 0, 1, 1.0f);
    s->reward[0] = INFINITY;
    move_to_memory(s, &rx.shm);
    assert_int_equal(take(&rx, s, &ack, err), RO_ERANGE);
    assert_non_null(strstr(err, "infinite"));
    assert_int_equal(rx.segments, 1);

    /* Without the node's memory mapped, an in-memory segment is refused. */
    ro__shared_mem_release(&rx.shm);
    seg_init(s, 4, 0, 1, 0, 1, 1.0f);
    s->seg.in_memory = true;
    assert_true(take(&rx, s, &ack, err) < 0);
    assert_int_equal(rx.segments, 1);
    free(s);
    ro__stream_rx_free(&rx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accounting), cmocka_unit_test(test_duplicates_and_gaps),
        cmocka_unit_test(test_restart),    cmocka_unit_test(test_other_frames),
        cmocka_unit_test(test_refused),    cmocka_unit_test(test_in_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
