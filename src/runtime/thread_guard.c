#include "runtime/thread_guard.h"

#include <cblas.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const blas_vars[] = {
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "GOTO_NUM_THREADS",
};

int ro__threads_single_blas(char **argv)
{
    int all_set = 1;
    for (size_t i = 0; i < sizeof blas_vars / sizeof blas_vars[0]; i++) {
        const char *v = getenv(blas_vars[i]);
        if (!v || strcmp(v, "1") != 0) {
            setenv(blas_vars[i], "1", 1);
            all_set = 0;
        }
    }
    if (all_set)
        return 0;
    /* OpenBLAS already sized its pool from the old values: start over.
     * Through the real path, not /proc/self/exe, so that the process keeps
     * its name (ps, pgrep rollout-node) instead of becoming "exe". */
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        execv(self, argv);
    }
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc?): at least stop OpenBLAS from using its pool. */
    openblas_set_num_threads(1);
    return -1;
}

int ro__thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}
