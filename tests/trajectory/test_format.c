/*
 * The trajectory format (src/trajectory/format.c): the one-pass encoder of a
 * TransitionBatch gives protobuf-c's bytes exactly, and records whose CRC is
 * right but whose contents are inconsistent fail the batch checks (seen
 * through the reader, which resynchronises after them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "runtime/error.h"
#include "traj_fixture.h"

/* The one-pass encoder gives protobuf-c's bytes exactly. */
static void test_encoder_matches_protobuf_c(void **state)
{
    (void)state;
    uint8_t a[8192], b2[8192];
    for (uint32_t i = 0; i < 300; i++) {
        batch_data_t d;
        make_batch(&d, i * 7919u);
        d.b.record = i % 3 ? (uint64_t)i * 1000003u : 0;
        d.b.dropped = i % 5 ? 0 : i;
        d.b.reseed = i % 7 ? 0 : (uint64_t)i << (i % 64); /* a learner's reseed: field 17 */
        d.episode[1] = (uint64_t)i << (i % 60);
        d.env[0] = i * 2654435761u;
        d.action[2] = (int32_t)(i % 4) - 2; /* negative: 10-byte varints */
        if (i % 11 == 0)
            d.b.n_action = 0;
        if (i % 13 == 0)
            d.b.n_env = d.b.n_episode = d.b.n_step = d.b.n_flags = d.b.n_reward = d.b.n_obs = 0;
        size_t n = protobuf_c_message_get_packed_size(&d.b.base);
        assert_int_equal(ro__traj_batch_packed_size(&d.b), n);
        assert_int_equal(protobuf_c_message_pack(&d.b.base, a), n);
        assert_int_equal(ro__traj_batch_pack(&d.b, b2), n);
        assert_memory_equal(a, b2, n);
    }
    /* Box actions too. */
    float box[ENVS * 2] = {1.5f, -2.0f, 0.0f, 3.25f, -0.0f, 7.0f, 1e-30f, -1e30f};
    batch_data_t d;
    make_batch(&d, 5);
    d.b.n_action = 0;
    d.b.action_box = box;
    d.b.n_action_box = ENVS * 2;
    size_t n = protobuf_c_message_get_packed_size(&d.b.base);
    assert_int_equal(ro__traj_batch_pack(&d.b, b2), n);
    protobuf_c_message_pack(&d.b.base, a);
    assert_memory_equal(a, b2, n);
    /* Snapshots (format version 3): nested messages after the columns. */
    uint8_t blob[300];
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (uint8_t)(i * 31);
    Rollout__V1__EnvSnapshot sn[3], *snp[3];
    for (uint32_t i = 0; i < 3; i++) {
        rollout__v1__env_snapshot__init(&sn[i]);
        sn[i].env = i;
        sn[i].episode = (uint64_t)i << 40;
        sn[i].step = 17 * i;
        sn[i].env_steps = 100000 * (i + 1);
        sn[i].state.len = 100 * (i + 1);
        sn[i].state.data = blob;
        snp[i] = &sn[i];
    }
    d.b.snapshots = snp;
    d.b.n_snapshots = 3;
    n = protobuf_c_message_get_packed_size(&d.b.base);
    assert_int_equal(ro__traj_batch_packed_size(&d.b), n);
    assert_int_equal(ro__traj_batch_pack(&d.b, b2), n);
    protobuf_c_message_pack(&d.b.base, a);
    assert_memory_equal(a, b2, n);
}

/* Records with valid CRCs but inconsistent contents are damage too. */
static void test_invalid_records(void **state)
{
    (void)state;
    fixture_file_t f;
    make_header(&f);
    uint8_t buf[8192];
    memcpy(buf, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN);
    size_t n = RO_TRAJ_MAGIC_LEN + ro__traj_frame(buf + RO_TRAJ_MAGIC_LEN, &f.hdr.base);
    batch_data_t d;
    for (int variant = 0; variant < 5; variant++) {
        size_t m = n;
        make_batch(&d, 0);
        d.b.record = 1;
        m += ro__traj_frame(buf + m, &d.b.base); /* good */
        make_batch(&d, 1);
        d.b.record = 2;
        if (variant == 0)
            d.b.n_obs--; /* wrong number of observation values */
        else if (variant == 1)
            d.env[2] = ENVS; /* env out of range */
        else if (variant == 2)
            d.b.n_reward = 1; /* columns differ */
        else if (variant == 3)
            d.flags[0] = RO_TRAJ_RESET; /* a reset with step != 0 */
        else
            d.b.n_action = 0; /* no actions */
        m += ro__traj_frame(buf + m, &d.b.base);
        make_batch(&d, 2);
        d.b.record = 3;
        m += ro__traj_frame(buf + m, &d.b.base); /* good */
        outcome_t o;
        read_all(buf, m, true, &o, true);
        assert_int_equal(o.batches, 2);
        assert_int_equal(o.corrupt, 1);
        assert_int_equal(o.first_bad_record, 2);
        assert_non_null(strstr(o.last_msg, "resynchronised"));
    }
}

/* A learner's reseed: reset entries may say RESTART, and RESEEDED with it;
 * no step entry says either, and no other bit is known. */
static void test_restart_flags(void **state)
{
    (void)state;
    fixture_file_t f;
    make_header(&f);
    char why[160];
    static const struct {
        uint32_t flags;
        bool ok;
    } cases[] = {
        {RO_TRAJ_RESET | RO_TRAJ_RESTART, true},
        {RO_TRAJ_RESET | RO_TRAJ_RESTART | RO_TRAJ_RESEEDED, true},
        {RO_TRAJ_RESET | RO_TRAJ_RESEEDED, false}, /* re-created, but no restart */
        {RO_TRAJ_RESET | RO_TRAJ_RESTART | RO_TRAJ_TERMINATED, false},
        {RO_TRAJ_TERMINATED | RO_TRAJ_RESTART, false}, /* a step entry */
        {RO_TRAJ_RESET | RO_TRAJ_RESTART | 64, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        batch_data_t d;
        make_batch(&d, 1);
        d.flags[0] = cases[c].flags;
        d.step[0] = cases[c].flags & RO_TRAJ_RESET ? 0 : 3;
        d.b.reseed = 99;
        int rc = ro__traj_validate_batch(&f.hdr, &d.b, why, sizeof why);
        assert_int_equal(rc, cases[c].ok ? 0 : RO_EBADMSG);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_flags),
        cmocka_unit_test(test_encoder_matches_protobuf_c),
        cmocka_unit_test(test_invalid_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
