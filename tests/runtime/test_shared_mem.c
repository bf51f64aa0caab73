/*
 * Shared memory (runtime/shared_mem.c): what the owner writes, a peer that
 * maps the descriptor it was handed sees; memory the peer only reads is
 * sealed so that nobody but the owner's own mapping can write it (no
 * writable mapping, no write(), not even through a reopened
 * /proc/self/fd/N); memory the peer writes is seen by the owner; the size
 * never changes; and a peer refuses, naming why, a descriptor that is not
 * among those handed over, a file of another size, one that could shrink
 * and a size no pool has. This process plays both sides.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/shared_mem.h"

static void test_a_peer_sees_what_the_owner_writes(void **state)
{
    (void)state;
    ro_shared_mem_t own, peer;
    char err[256];
    const size_t bytes = 3 * 4096 + 100;
    assert_int_equal(ro__shared_mem_create(&own, "test", bytes, false, err, sizeof err), 0);
    assert_true(own.fd >= 0 && own.bytes == bytes);
    for (size_t i = 0; i < bytes; i++) /* zeroed, as a pool expects */
        assert_int_equal(((uint8_t *)own.base)[i], 0);
    int fds[2] = {-1, own.fd};
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, fds, 2, 2, bytes, false, "test memory", err, sizeof err), 0);
    assert_true(peer.base != own.base && peer.fd == -1);
    memset(own.base, 0xA5, bytes); /* the owner's mapping stays writable */
    ((uint8_t *)own.base)[bytes - 1] = 7;
    assert_int_equal(((uint8_t *)peer.base)[0], 0xA5);
    assert_int_equal(((uint8_t *)peer.base)[bytes - 1], 7);
    /* The owner's memory cannot shrink under the mapping, nor grow. */
    assert_int_equal(ftruncate(own.fd, 4096), -1);
    assert_int_equal(ftruncate(own.fd, (off_t)bytes * 2), -1);
    ro__shared_mem_release(&peer);
    ro__shared_mem_release(&own);
    assert_null(own.base);
    ro__shared_mem_release(&own); /* twice: left alone */
}

static void test_memory_the_peer_reads_is_written_by_the_owner_alone(void **state)
{
    (void)state;
    ro_shared_mem_t own, peer;
    char err[256];
    assert_int_equal(ro__shared_mem_create(&own, "test-obs", 8192, false, err, sizeof err), 0);
    /* Whoever holds the descriptor (the peer it was handed to, or one that
     * got it some other way) cannot map it writable ... */
    assert_int_equal(ro__shared_mem_map_peer(&peer, &own.fd, 1, 1, 8192, true, "observation memory",
                                             err, sizeof err),
                     -EPERM);
    assert_non_null(strstr(err, "mapping its observation memory"));
    assert_true(mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, own.fd, 0) == MAP_FAILED);
    /* ... nor write() to it, nor make a read-only mapping writable, nor
     * reopen it read-write through /proc and write that. */
    assert_int_equal(pwrite(own.fd, "x", 1, 0), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(ro__shared_mem_map_peer(&peer, &own.fd, 1, 1, 8192, false,
                                             "observation memory", err, sizeof err),
                     0);
    assert_int_equal(mprotect(peer.base, 4096, PROT_READ | PROT_WRITE), -1);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", own.fd);
    int again = open(path, O_RDWR | O_CLOEXEC);
    assert_true(again >= 0);
    assert_int_equal(pwrite(again, "x", 1, 0), -1);
    assert_true(mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0) == MAP_FAILED);
    close(again);
    /* The seals are closed: nobody can lift or add one. */
    assert_int_equal(fcntl(own.fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
    ((uint8_t *)own.base)[8191] = 3; /* the owner still writes */
    assert_int_equal(((uint8_t *)peer.base)[8191], 3);
    ro__shared_mem_release(&peer);
    ro__shared_mem_release(&own);
}

static void test_a_writing_peer_is_seen_by_the_owner(void **state)
{
    (void)state;
    ro_shared_mem_t own, peer, wrong;
    char err[256];
    assert_int_equal(ro__shared_mem_create(&own, "test-act", 4096, true, err, sizeof err), 0);
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, &own.fd, 1, 1, 4096, true, "action memory", err, sizeof err),
        0);
    ((int32_t *)peer.base)[100] = -5; /* SEED actions: the learner writes */
    assert_int_equal(((int32_t *)own.base)[100], -5);
    /* Still sized once and for all: the writer cannot shrink it either. */
    assert_int_equal(ftruncate(own.fd, 0), -1);
    assert_int_equal(ro__shared_mem_map_peer(&wrong, &own.fd, 1, 1, 8192, true, "action memory",
                                             err, sizeof err),
                     RO_EPROTO);
    ro__shared_mem_release(&peer);
    ro__shared_mem_release(&own);
}

static void test_a_peer_refuses_what_it_cannot_trust(void **state)
{
    (void)state;
    ro_shared_mem_t own, peer;
    char err[256];
    assert_int_equal(ro__shared_mem_create(&own, "test", 8192, false, err, sizeof err), 0);
    /* Another size than the one offered. */
    assert_int_equal(ro__shared_mem_map_peer(&peer, &own.fd, 1, 1, 4096, false, "segment memory",
                                             err, sizeof err),
                     -EPROTO);
    assert_non_null(strstr(err, "its segment memory is not 4096 bytes"));
    assert_null(peer.base);
    /* A file that may shrink (a memfd without seals). */
    int loose = memfd_create("loose", MFD_CLOEXEC);
    assert_true(loose >= 0);
    assert_int_equal(ftruncate(loose, 8192), 0);
    assert_int_equal(ro__shared_mem_map_peer(&peer, &loose, 1, 1, 8192, false, "segment memory",
                                             err, sizeof err),
                     -EPROTO);
    assert_non_null(strstr(err, "not sealed"));
    close(loose);
    /* Not among the descriptors that came (0, past the last, none came);
     * sizes no pool has. */
    assert_int_equal(ro__shared_mem_map_peer(&peer, &own.fd, 1, 0, 8192, false, "segment memory",
                                             err, sizeof err),
                     -EPROTO);
    assert_non_null(strstr(err, "descriptor 0 of the 1 that came with the welcome"));
    assert_int_equal(ro__shared_mem_map_peer(&peer, &own.fd, 1, 2, 8192, false, "segment memory",
                                             err, sizeof err),
                     -EPROTO);
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, NULL, 0, 1, 8192, false, "segment memory", err, sizeof err),
        -EPROTO);
    assert_int_equal(
        ro__shared_mem_map_peer(&peer, &own.fd, 1, 1, 0, false, "segment memory", err, sizeof err),
        -EPROTO);
    assert_int_equal(ro__shared_mem_map_peer(&peer, &own.fd, 1, 1, UINT64_MAX, false,
                                             "segment memory", err, sizeof err),
                     -EPROTO);
    ro__shared_mem_release(&own);
    ro_shared_mem_t zeroed = {0}; /* fd 0 is not its own: left open, if it was */
    bool stdin_open = fcntl(0, F_GETFD) >= 0;
    ro__shared_mem_release(&zeroed);
    assert_int_equal(fcntl(0, F_GETFD) >= 0, stdin_open);
}

static void test_a_private_process_is_not_dumpable(void **state)
{
    (void)state;
    pid_t pid = fork(); /* this test process stays as it was */
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(ro__process_private() == 0 && prctl(PR_GET_DUMPABLE) == 0 ? 0 : 1);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_peer_sees_what_the_owner_writes),
        cmocka_unit_test(test_memory_the_peer_reads_is_written_by_the_owner_alone),
        cmocka_unit_test(test_a_writing_peer_is_seen_by_the_owner),
        cmocka_unit_test(test_a_peer_refuses_what_it_cannot_trust),
        cmocka_unit_test(test_a_private_process_is_not_dumpable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
