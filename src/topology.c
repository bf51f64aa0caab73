#include "topology.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ro_build_config.h"

#if RO_HAVE_NUMA
#include <numa.h>
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
