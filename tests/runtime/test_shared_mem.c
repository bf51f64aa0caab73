/*
 * Shared segment memory (runtime/shared_mem.c): what the owner writes, a
 * peer that maps it through /proc/PID/fd sees, read-only; the owner's
 * memory is sealed, so its size cannot change; and a peer refuses, naming
 * why, a file of another size, one that could shrink, a descriptor that is
 * not there and a size no pool has. This process plays both sides (its
 * own pid is the "peer").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/shared_mem.h"

static void test_a_peer_sees_what_the_owner_writes(void **state)
{
    (void)state;
    ro_shared_mem_t own, peer;
    char err[256];
    const size_t bytes = 3 * 4096 + 100;
    assert_int_equal(ro__shared_mem_create(&own, "test", bytes, err, sizeof err), 0);
    assert_true(own.fd >= 0 && own.bytes == bytes);
    for (size_t i = 0; i < bytes; i++) /* zeroed, as a pool expects */
        assert_int_equal(((uint8_t *)own.base)[i], 0);
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, getpid(), (uint32_t)own.fd, bytes, err, sizeof err), 0);
    assert_true(peer.base != own.base && peer.fd == -1);
    memset(own.base, 0xA5, bytes);
    ((uint8_t *)own.base)[bytes - 1] = 7;
    assert_int_equal(((uint8_t *)peer.base)[0], 0xA5);
    assert_int_equal(((uint8_t *)peer.base)[bytes - 1], 7);
    /* The peer's mapping cannot be made writable: it opened the file
     * read-only. */
    assert_int_equal(mprotect(peer.base, 4096, PROT_READ | PROT_WRITE), -1);
    assert_int_equal(errno, EACCES);
    /* The owner's memory cannot shrink under the mapping, nor grow. */
    assert_int_equal(ftruncate(own.fd, 4096), -1);
    assert_int_equal(ftruncate(own.fd, (off_t)bytes * 2), -1);
    ro__shared_mem_release(&peer);
    ro__shared_mem_release(&own);
    assert_null(own.base);
    ro__shared_mem_release(&own); /* twice: left alone */
}

static void test_a_writing_peer_is_seen_by_the_owner(void **state)
{
    (void)state;
    ro_shared_mem_t own, peer, wrong;
    char err[256];
    assert_int_equal(ro__shared_mem_create(&own, "test-act", 4096, err, sizeof err), 0);
    assert_int_equal(
        ro__shared_mem_map_peer_rw(&peer, getpid(), (uint32_t)own.fd, 4096, err, sizeof err), 0);
    ((int32_t *)peer.base)[100] = -5; /* SEED actions: the learner writes */
    assert_int_equal(((int32_t *)own.base)[100], -5);
    /* Still sized once and for all: the writer cannot shrink it either. */
    assert_int_equal(ftruncate(own.fd, 0), -1);
    assert_int_equal(
        ro__shared_mem_map_peer_rw(&wrong, getpid(), (uint32_t)own.fd, 8192, err, sizeof err),
        RO_EPROTO);
    ro__shared_mem_release(&peer);
    ro__shared_mem_release(&own);
}

static void test_a_peer_refuses_what_it_cannot_trust(void **state)
{
    (void)state;
    ro_shared_mem_t own, peer;
    char err[256];
    assert_int_equal(ro__shared_mem_create(&own, "test", 8192, err, sizeof err), 0);
    /* Another size than the one offered. */
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, getpid(), (uint32_t)own.fd, 4096, err, sizeof err), -EPROTO);
    assert_non_null(strstr(err, "is not 4096 bytes"));
    assert_null(peer.base);
    /* A file that may shrink (a memfd without seals). */
    int loose = memfd_create("loose", MFD_CLOEXEC);
    assert_true(loose >= 0);
    assert_int_equal(ftruncate(loose, 8192), 0);
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, getpid(), (uint32_t)loose, 8192, err, sizeof err), -EPROTO);
    assert_non_null(strstr(err, "not sealed"));
    close(loose);
    /* No such descriptor; no such process; sizes no pool has. */
    assert_int_equal(ro__shared_mem_map_peer(&peer, getpid(), 1u << 30, 8192, err, sizeof err),
                     -ENOENT);
    assert_non_null(strstr(err, "/proc/"));
    assert_int_equal(ro__shared_mem_map_peer(&peer, 0, (uint32_t)own.fd, 8192, err, sizeof err),
                     -EINVAL);
    assert_int_equal(ro__shared_mem_map_peer(&peer, getpid(), (uint32_t)own.fd, 0, err, sizeof err),
                     -EPROTO);
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, getpid(), (uint32_t)own.fd, UINT64_MAX, err, sizeof err),
        -EPROTO);
    ro__shared_mem_release(&own);
    ro_shared_mem_t zeroed = {0}; /* fd 0 is not its own: left open, if it was */
    bool stdin_open = fcntl(0, F_GETFD) >= 0;
    ro__shared_mem_release(&zeroed);
    assert_int_equal(fcntl(0, F_GETFD) >= 0, stdin_open);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_peer_sees_what_the_owner_writes),
        cmocka_unit_test(test_a_writing_peer_is_seen_by_the_owner),
        cmocka_unit_test(test_a_peer_refuses_what_it_cannot_trust),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
