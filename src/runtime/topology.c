#include "runtime/topology.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/numa_mem.h"
#include "ro_build_config.h"

#if RO_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

static int node_of_cpu(int cpu, bool *numa)
{
#if RO_HAVE_NUMA
    if (*numa) {
        int n = numa_node_of_cpu(cpu);
        if (n >= 0)
            return n;
    }
#endif
    (void)cpu;
    *numa = false;
    return 0;
}

int ro__topology_read(ro_topology_t *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        snprintf(err, errlen, "sched_getaffinity failed");
        return RO_EIO;
    }
#if RO_HAVE_NUMA
    t->numa = numa_available() >= 0;
#endif
    int node_of[CPU_SETSIZE];
    for (int c = 0; c < CPU_SETSIZE; c++) {
        node_of[c] = -1;
        if (!CPU_ISSET(c, &set))
            continue;
        node_of[c] = node_of_cpu(c, &t->numa);
        t->ncpus++;
    }
    if (!t->numa) /* any lookup failure: one node with every CPU */
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (node_of[c] >= 0)
                node_of[c] = 0;

    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (node_of[c] < 0)
            continue;
        int k = 0;
        while (k < t->nnodes && t->nodes[k].id != node_of[c])
            k++;
        if (k == t->nnodes) {
            if (t->nnodes == RO_TOPO_MAX_NODES) {
                snprintf(err, errlen, "more than %d NUMA nodes", RO_TOPO_MAX_NODES);
                ro__topology_free(t);
                return RO_ERANGE;
            }
            t->nodes[k].id = node_of[c];
            t->nodes[k].cpus = calloc((size_t)t->ncpus, sizeof(int));
            if (!t->nodes[k].cpus) {
                ro__topology_free(t);
                return RO_ENOMEM;
            }
            t->nnodes++;
        }
        t->nodes[k].cpus[t->nodes[k].ncpus++] = c;
    }
    if (t->ncpus == 0) {
        snprintf(err, errlen, "no CPU in the allowed set");
        return RO_EIO;
    }
    for (int i = 0; i < t->nnodes; i++) {
        t->nodes[i].mem_node = t->numa ? t->nodes[i].id : -1;
        for (int j = 0; j < t->nnodes; j++) {
            int d = i == j ? 10 : 20;
#if RO_HAVE_NUMA
            if (t->numa && numa_distance(t->nodes[i].id, t->nodes[j].id) > 0)
                d = numa_distance(t->nodes[i].id, t->nodes[j].id);
#endif
            t->distance[i][j] = d;
        }
    }
    return 0;
}

void ro__topology_free(ro_topology_t *t)
{
    for (int i = 0; i < t->nnodes; i++)
        free(t->nodes[i].cpus);
    t->nnodes = 0;
}

int ro__topology_plan(const ro_topology_t *t, int nworkers, bool overcommit, ro_worker_plan_t *plan,
                      int *group_nodes, int *ngroups)
{
    if (nworkers < 1)
        return RO_EINVAL;
    if (nworkers > t->ncpus && !overcommit)
        return RO_ERANGE;
    int group_of_node[RO_TOPO_MAX_NODES];
    for (int i = 0; i < t->nnodes; i++)
        group_of_node[i] = -1;
    *ngroups = 0;

    int taken[RO_TOPO_MAX_NODES] = {0};
    int w = 0;
    while (w < nworkers) {
        bool placed = false;
        for (int k = 0; k < t->nnodes && w < nworkers; k++) {
            const ro_topo_node_t *n = &t->nodes[k];
            if (taken[k] >= n->ncpus && !overcommit)
                continue;
            if (group_of_node[k] < 0) {
                group_of_node[k] = (*ngroups)++;
                group_nodes[group_of_node[k]] = n->id;
            }
            plan[w].cpu = n->cpus[taken[k] % n->ncpus];
            plan[w].group = group_of_node[k];
            taken[k]++;
            w++;
            placed = true;
        }
        if (!placed)
            return RO_ERANGE;
    }
    return 0;
}

/* Parses a decimal int at *p in [0, max]; advances *p. */
static bool parse_num(const char **p, int max, int *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return false;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > max)
            return false;
        s++;
    }
    *p = s;
    *out = (int)v;
    return true;
}

void ro__topology_cpulist(const int *cpus, int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && off < len; i++) {
        int j = i;
        while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
            j++;
        int w = j > i ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", cpus[i], cpus[j])
                      : snprintf(buf + off, len - off, "%s%d", off ? "," : "", cpus[i]);
        if (w < 0)
            break;
        off += (size_t)w;
        i = j;
    }
}

static void set_cpulist(const cpu_set_t *set, char *buf, size_t len)
{
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set))
            cpus[n++] = c;
    ro__topology_cpulist(cpus, n, buf, len);
}

/* The real node whose memory a declared node uses: that of its first CPU. */
static int real_node_of(int cpu)
{
#if RO_HAVE_NUMA
    if (numa_available() >= 0) {
        int n = numa_node_of_cpu(cpu);
        return n >= 0 ? n : 0;
    }
#endif
    (void)cpu;
    return -1;
}

int ro__topology_parse(ro_topology_t *t, const char *spec, const cpu_set_t *allowed,
                       const char *what, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->fake = true;
    cpu_set_t seen;
    CPU_ZERO(&seen);
    int node_of[CPU_SETSIZE];
    const char *p = spec;
    char allowed_list[256];
    if (!spec || *spec == '\0') {
        snprintf(err, errlen, "%s: empty; expected nodes like 0:0-3;1:4-7", what);
        return RO_EINVAL;
    }
    while (*p) {
        int id;
        if (!parse_num(&p, RO_TOPO_MAX_NODES - 1, &id) || *p != ':') {
            snprintf(err, errlen,
                     "%s '%s': expected NODE:CPUS at '%s' (NODE in [0, %d]), e.g. 0:0-3;1:4-7",
                     what, spec, p, RO_TOPO_MAX_NODES - 1);
            goto fail;
        }
        p++;
        if (ro__topology_find(t, id) >= 0) {
            snprintf(err, errlen, "%s '%s': node %d is declared twice", what, spec, id);
            goto fail;
        }
        int k = t->nnodes++;
        t->nodes[k].id = id;
        t->nodes[k].cpus = calloc(CPU_SETSIZE, sizeof(int));
        if (!t->nodes[k].cpus) {
            ro__topology_free(t);
            return RO_ENOMEM;
        }
        for (;;) {
            int lo, hi;
            if (!parse_num(&p, CPU_SETSIZE - 1, &lo)) {
                if (*p >= '0' && *p <= '9')
                    snprintf(err, errlen,
                             "%s '%s': node %d: CPU at '%s' is not in this process's allowed set "
                             "(CPUs are 0..%d)",
                             what, spec, id, p, CPU_SETSIZE - 1);
                else
                    snprintf(err, errlen, "%s '%s': node %d: expected a CPU number at '%s'", what,
                             spec, id, p);
                goto fail;
            }
            hi = lo;
            if (*p == '-') {
                p++;
                if (!parse_num(&p, CPU_SETSIZE - 1, &hi) || hi < lo) {
                    snprintf(err, errlen, "%s '%s': node %d: bad CPU range ending at '%s'", what,
                             spec, id, p);
                    goto fail;
                }
            }
            for (int c = lo; c <= hi; c++) {
                if (!CPU_ISSET(c, allowed)) {
                    set_cpulist(allowed, allowed_list, sizeof allowed_list);
                    snprintf(err, errlen,
                             "%s '%s': node %d: CPU %d is not in this process's allowed set (%s)",
                             what, spec, id, c, allowed_list);
                    goto fail;
                }
                if (CPU_ISSET(c, &seen)) {
                    snprintf(err, errlen, "%s '%s': CPU %d is in two nodes (%d and %d)", what, spec,
                             c, node_of[c], id);
                    goto fail;
                }
                CPU_SET(c, &seen);
                node_of[c] = id;
            }
            if (*p != ',')
                break;
            p++;
        }
        if (*p == ';' && p[1] != '\0')
            p++;
        else if (*p != '\0') {
            snprintf(err, errlen, "%s '%s': unexpected '%c' after node %d's CPUs", what, spec, *p,
                     id);
            goto fail;
        }
    }
    /* Each node's CPUs ascending, whatever order the spec listed them in. */
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &seen))
            continue;
        ro_topo_node_t *n = &t->nodes[ro__topology_find(t, node_of[c])];
        n->cpus[n->ncpus++] = c;
        t->ncpus++;
    }
    for (int i = 0; i < t->nnodes; i++) {
        t->nodes[i].mem_node = real_node_of(t->nodes[i].cpus[0]);
        for (int j = 0; j < t->nnodes; j++)
            t->distance[i][j] = i == j ? 10 : 20;
    }
    t->numa = ro__numa_available();
    return 0;
fail:
    ro__topology_free(t);
    return RO_EINVAL;
}

int ro__topology_load(ro_topology_t *t, const char *spec, const char *what, char *err,
                      size_t errlen)
{
    if (!spec) {
        spec = getenv(RO_TOPOLOGY_ENV);
        what = RO_TOPOLOGY_ENV;
        if (spec && *spec == '\0')
            spec = NULL;
    }
    if (!spec)
        return ro__topology_read(t, err, errlen);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        snprintf(err, errlen, "sched_getaffinity failed: %s", strerror(errno));
        return RO_EIO;
    }
    return ro__topology_parse(t, spec, &allowed, what, err, errlen);
}

int ro__topology_find(const ro_topology_t *t, int id)
{
    for (int i = 0; i < t->nnodes; i++)
        if (t->nodes[i].id == id)
            return i;
    return -1;
}

int ro__topology_restrict(ro_topology_t *t, int id, char *err, size_t errlen)
{
    int k = ro__topology_find(t, id);
    if (k < 0) {
        char ids[256] = "";
        size_t off = 0;
        for (int i = 0; i < t->nnodes && off < sizeof ids; i++)
            off += (size_t)snprintf(ids + off, sizeof ids - off, "%s%d", i ? ", " : "",
                                    t->nodes[i].id);
        snprintf(err, errlen,
                 "--numa-node %d: no such NUMA node with CPUs this process may use (nodes: %s)", id,
                 ids);
        return RO_ENOENT;
    }
    int d = t->distance[k][k];
    for (int i = 0; i < t->nnodes; i++)
        if (i != k)
            free(t->nodes[i].cpus);
    t->nodes[0] = t->nodes[k];
    for (int i = 1; i < t->nnodes; i++)
        t->nodes[i].cpus = NULL;
    t->nnodes = 1;
    t->ncpus = t->nodes[0].ncpus;
    memset(t->distance, 0, sizeof t->distance);
    t->distance[0][0] = d;
    return 0;
}

int ro__topology_bind(const ro_topology_t *t, int id, char *err, size_t errlen)
{
    int k = ro__topology_find(t, id);
    if (k < 0) {
        snprintf(err, errlen, "--numa-node %d: no such node", id);
        return RO_ENOENT;
    }
    const ro_topo_node_t *n = &t->nodes[k];
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < n->ncpus; i++)
        CPU_SET(n->cpus[i], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        snprintf(err, errlen, "--numa-node %d: cannot bind to its CPUs: %s", id, strerror(errno));
        return RO_EIO;
    }
#if RO_HAVE_NUMA
    if (n->mem_node >= 0 && numa_available() >= 0) {
        unsigned long mask[16] = {0};
        const int bits = 8 * (int)sizeof(unsigned long);
        if (n->mem_node >= bits * 16) {
            snprintf(err, errlen, "--numa-node %d: memory node %d out of range", id, n->mem_node);
            return RO_ERANGE;
        }
        mask[n->mem_node / bits] |= 1ul << (n->mem_node % bits);
        if (set_mempolicy(MPOL_BIND, mask, 8 * sizeof mask) != 0) {
            snprintf(err, errlen, "--numa-node %d: cannot bind memory to node %d: %s", id,
                     n->mem_node, strerror(errno));
            return RO_EIO;
        }
    }
#endif
    return 0;
}

void ro__topology_print(FILE *f, const ro_topology_t *t, const ro_worker_plan_t *plan, int nworkers,
                        const int *group_nodes, int ngroups)
{
    char list[1024];
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    sched_getaffinity(0, sizeof allowed, &allowed);
    set_cpulist(&allowed, list, sizeof list);
    fprintf(f, "topology: %d NUMA node(s), %d CPUs used; allowed CPUs %s; source: %s\n", t->nnodes,
            t->ncpus, list,
            t->fake   ? "declared (--topology / " RO_TOPOLOGY_ENV ")"
            : t->numa ? "libnuma"
                      : "single node (no libnuma)");
    for (int i = 0; i < t->nnodes; i++) {
        const ro_topo_node_t *n = &t->nodes[i];
        ro__topology_cpulist(n->cpus, n->ncpus, list, sizeof list);
        if (n->mem_node >= 0)
            fprintf(f, "node %d: CPUs %s (%d); memory on node %d\n", n->id, list, n->ncpus,
                    n->mem_node);
        else
            fprintf(f, "node %d: CPUs %s (%d); memory not placed (no libnuma)\n", n->id, list,
                    n->ncpus);
    }
    fprintf(f, "distances:\n      ");
    for (int j = 0; j < t->nnodes; j++)
        fprintf(f, " %4d", t->nodes[j].id);
    fprintf(f, "\n");
    for (int i = 0; i < t->nnodes; i++) {
        fprintf(f, "  %4d", t->nodes[i].id);
        for (int j = 0; j < t->nnodes; j++)
            fprintf(f, " %4d", t->distance[i][j]);
        fprintf(f, "\n");
    }
    fprintf(f, "plan: %d workers (+1 loop thread) in %d group(s)\n", nworkers, ngroups);
    for (int g = 0; g < ngroups; g++) {
        int cnt = 0;
        for (int w = 0; w < nworkers; w++)
            cnt += plan[w].group == g;
        fprintf(f, "  node %d: %d worker(s):", group_nodes[g], cnt);
        for (int w = 0; w < nworkers; w++)
            if (plan[w].group == g)
                fprintf(f, " w%d->cpu%d", w, plan[w].cpu);
        fprintf(f, "\n");
    }
}

/* NUMA nodes the kernel has (1 without libnuma). */
int ro__topology_os_nodes(void)
{
#if RO_HAVE_NUMA
    if (numa_available() >= 0)
        return numa_num_configured_nodes();
#endif
    return 1;
}
