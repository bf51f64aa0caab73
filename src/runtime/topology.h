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
#include <sched.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/scheduler.h"

#define RO_TOPO_MAX_NODES 64

typedef struct ro_topo_node {
    int id;    /* NUMA node id */
    int ncpus; /* allowed CPUs on this node */
    int *cpus; /* their ids, ascending */
    /* The real NUMA node that holds this node's memory: id itself for a
     * node read from the OS; for a declared (fake) node, the real node of
     * its first CPU. -1 when memory cannot be placed (no libnuma). */
    int mem_node;
} ro_topo_node_t;

typedef struct ro_topology {
    int nnodes;
    ro_topo_node_t nodes[RO_TOPO_MAX_NODES];
    int ncpus; /* allowed CPUs in all */
    bool numa; /* grouped by libnuma (false: single-node fallback) */
    bool fake; /* declared by --topology / ROLLOUT_TOPOLOGY, not read */
    /* distance[i][j] between nodes[i] and nodes[j] as the kernel reports
     * it (10 = local); declared nodes: 10 to itself, 20 to the others. */
    int distance[RO_TOPO_MAX_NODES][RO_TOPO_MAX_NODES];
} ro_topology_t;

/* The environment variable that declares a topology (see
 * ro__topology_parse), used when no --topology is given. */
#define RO_TOPOLOGY_ENV "ROLLOUT_TOPOLOGY"

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

/*
 * ro__topology_parse builds a declared topology from spec, e.g.
 * "0:0-3;1:4-7": nodes separated by ';', each "ID:CPUS" with CPUS a
 * comma-separated list of CPUs and ranges. Every CPU must be in `allowed`
 * and in one node only; node ids are distinct, in [0, RO_TOPO_MAX_NODES);
 * allowed CPUs not listed are not used. No spaces. `what` names the source
 * in messages ("--topology", "ROLLOUT_TOPOLOGY"). On error returns
 * RO_EINVAL with one line in err. Any thread.
 */
int ro__topology_parse(ro_topology_t *t, const char *spec, const cpu_set_t *allowed,
                       const char *what, char *err, size_t errlen);

/*
 * ro__topology_load reads the topology: from spec if not NULL (what names
 * it), else from the RO_TOPOLOGY_ENV variable if set and not empty, else
 * from the OS (ro__topology_read). Main thread.
 */
int ro__topology_load(ro_topology_t *t, const char *spec, const char *what, char *err,
                      size_t errlen);

/* ro__topology_find returns the index in t->nodes of node id, or -1. */
int ro__topology_find(const ro_topology_t *t, int id);

/* ro__topology_restrict keeps only node id (for --numa-node). RO_ENOENT
 * with a message naming the nodes there are if it has no allowed CPU. */
int ro__topology_restrict(ro_topology_t *t, int id, char *err, size_t errlen);

/*
 * ro__topology_bind binds the calling thread (and the threads it starts
 * later) to node id's CPUs, and its memory to the node's mem_node, as
 * `numactl --cpunodebind --membind` would. Call before starting threads.
 * Main thread.
 */
int ro__topology_bind(const ro_topology_t *t, int id, char *err, size_t errlen);

/* ro__topology_cpulist writes cpus[n] as a compact list ("0-3,8"). */
void ro__topology_cpulist(const int *cpus, int n, char *buf, size_t len);

/* ro__topology_print writes the nodes, their CPUs and memory, the distance
 * table and the worker plan (--print-topology). */
void ro__topology_print(FILE *f, const ro_topology_t *t, const ro_worker_plan_t *plan, int nworkers,
                        const int *group_nodes, int ngroups);

/* ro__topology_os_nodes returns the NUMA nodes the kernel has (1 without
 * libnuma). Any thread. */
int ro__topology_os_nodes(void);

#endif
