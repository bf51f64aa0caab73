/*
 * Whole writes to a file descriptor: write(2) may write less than asked
 * (a signal, a pipe, a full disk part-way).
 */
#ifndef RO_IO_H
#define RO_IO_H

#include <stddef.h>

/* ro__write_all writes the n bytes at p to fd, retrying short writes and
 * EINTR. Returns 0, or -errno of the write that failed (errno is left as
 * it set it). *done, if not NULL, is how many bytes reached fd, even on
 * error. Any thread. */
int ro__write_all(int fd, const void *p, size_t n, size_t *done);

#endif
