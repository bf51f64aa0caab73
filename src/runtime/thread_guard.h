/*
 * Thread discipline: a node runs 1 loop thread + W workers, nothing else.
 */
#ifndef RO_THREAD_GUARD_H
#define RO_THREAD_GUARD_H

/*
 * ro__threads_single_blas makes OpenBLAS, OpenMP and MKL single-threaded.
 * OpenBLAS starts its thread pool from a library constructor, before main()
 * runs, sized by OPENBLAS_NUM_THREADS; so if the variables are not all "1"
 * this sets them and re-executes the program once (argv unchanged). Call it
 * first thing in main(), before any env or plugin is loaded. Returns only if
 * the variables were already set or the re-exec failed (then it sets
 * openblas_set_num_threads(1) as a fallback and the caller may warn).
 * Returns 0, or -1 if the fallback was used.
 */
int ro__threads_single_blas(char **argv);

/* ro__thread_count returns the number of threads of this process, read from
 * /proc/self/task, or -1. Any thread. */
int ro__thread_count(void);

#endif
