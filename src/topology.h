/*
 * CPU and NUMA topology as this process may use it.
 *
 * Only CPUs in the process's allowed set (sched_getaffinity: cgroups,
 * taskset, SLURM) count. With libnuma (build feature -Dnuma) CPUs are grouped
 * by NUMA node; without it, or on a machine without NUMA, there is one node
 * (id 0) holding every allowed CPU: the same code path with one queue.
 */
#ifndef RO_TOPOLOGY_H
#define RO_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>

#include "scheduler.h"

#define RO_TOPO_MAX_NODES 64

typedef struct ro_topo_node {
    int id;    /* NUMA node id */
    int ncpus; /* allowed CPUs on this node */
    int *cpus; /* their ids, ascending */
} ro_topo_node_t;

typedef struct ro_topology {
    int nnodes;
    ro_topo_node_t nodes[RO_TOPO_MAX_NODES];
    int ncpus; /* allowed CPUs in all */
    bool numa; /* grouped by libnuma (false: single-node fallback) */
} ro_topology_t;

/* ro__topology_read fills t from the OS. Main thread. */
int ro__topology_read(ro_topology_t *t, char *err, size_t errlen);

/* ro__topology_free releases what ro__topology_read allocated. */
void ro__topology_free(ro_topology_t *t);

/*
 * ro__topology_plan places nworkers workers, one per allowed CPU, spreading
 * them over nodes in turn (node 0's first CPU, node 1's first, node 0's
 * second, ...). It fills plan[nworkers] and, for each worker group it
 * creates (one per node that got a worker), group_nodes[i] = its NUMA node;
 * *ngroups gets their number. If nworkers exceeds the allowed CPUs, returns
 * RO_ERANGE unless overcommit, in which case workers wrap round the CPUs.
 */
int ro__topology_plan(const ro_topology_t *t, int nworkers, bool overcommit, ro_worker_plan_t *plan,
                      int *group_nodes, int *ngroups);

#endif
