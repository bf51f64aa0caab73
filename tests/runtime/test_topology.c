/* Topology: declared nodes are parsed strictly, workers are spread over
 * nodes with one group per node, oversubscription is refused, pinned
 * workers read back their CPU from the OS, and node-local buffers read back
 * their node (get_mempolicy / move_pages). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/local/env_actor.h"
#include "envs/registry.h"
#include "runtime/error.h"
#include "node/node.h"
#include "runtime/numa_mem.h"
#include "ro_build_config.h"
#include "runtime/scheduler.h"
#include "runtime/topology.h"

#if RO_HAVE_NUMA
#include <numaif.h>
#endif

static cpu_set_t cpus_0_7(void)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c = 0; c < 8; c++)
        CPU_SET(c, &s);
    return s;
}

/* The first two CPUs this process may use; false if it has fewer. */
static bool two_allowed(int *a, int *b)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        return false;
    int k = 0, got[2];
    for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &s))
            got[k++] = c;
    if (k < 2)
        return false;
    *a = got[0];
    *b = got[1];
    return true;
}

static void test_parse_two_nodes(void **state)
{
    (void)state;
    cpu_set_t allowed = cpus_0_7();
    ro_topology_t t;
    char err[256] = "";
    assert_int_equal(ro__topology_parse(&t, "0:0-3;1:4-7", &allowed, "T", err, sizeof err), 0);
    assert_true(t.fake);
    assert_int_equal(t.nnodes, 2);
    assert_int_equal(t.ncpus, 8);
    assert_int_equal(t.nodes[0].id, 0);
    assert_int_equal(t.nodes[1].id, 1);
    assert_int_equal(t.nodes[1].ncpus, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t.nodes[0].cpus[i], i);
        assert_int_equal(t.nodes[1].cpus[i], 4 + i);
    }
    assert_int_equal(t.distance[0][0], 10);
    assert_int_equal(t.distance[0][1], 20);
    assert_int_equal(t.distance[1][0], 20);
    /* Memory of a declared node: the real node holding its first CPU. */
    if (ro__numa_available())
        assert_true(t.nodes[1].mem_node >= 0);
    else
        assert_int_equal(t.nodes[1].mem_node, -1);
    char list[64];
    ro__topology_cpulist(t.nodes[1].cpus, t.nodes[1].ncpus, list, sizeof list);
    assert_string_equal(list, "4-7");
    ro__topology_free(&t);
}

static void test_parse_lists_and_order(void **state)
{
    (void)state;
    cpu_set_t allowed = cpus_0_7();
    ro_topology_t t;
    char err[256] = "";
    assert_int_equal(ro__topology_parse(&t, "3:6,4-5;0:3,0-1", &allowed, "T", err, sizeof err), 0);
    assert_int_equal(t.nnodes, 2);
    assert_int_equal(t.ncpus, 6);
    int k3 = ro__topology_find(&t, 3), k0 = ro__topology_find(&t, 0);
    assert_true(k3 >= 0 && k0 >= 0);
    assert_int_equal(ro__topology_find(&t, 1), -1);
    int want3[] = {4, 5, 6}, want0[] = {0, 1, 3};
    assert_int_equal(t.nodes[k3].ncpus, 3);
    assert_int_equal(t.nodes[k0].ncpus, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(t.nodes[k3].cpus[i], want3[i]);
        assert_int_equal(t.nodes[k0].cpus[i], want0[i]);
    }
    char list[64];
    ro__topology_cpulist(t.nodes[k0].cpus, t.nodes[k0].ncpus, list, sizeof list);
    assert_string_equal(list, "0-1,3");
    ro__topology_free(&t);
}

static void expect_bad(const char *spec, const char *needle)
{
    cpu_set_t allowed = cpus_0_7();
    ro_topology_t t;
    char err[256] = "";
    int rc = ro__topology_parse(&t, spec, &allowed, "ROLLOUT_TOPOLOGY", err, sizeof err);
    if (rc != RO_EINVAL || !strstr(err, needle) || !strstr(err, "ROLLOUT_TOPOLOGY")) {
        fprintf(stderr, "spec '%s': rc %d, err '%s', wanted '%s'\n", spec, rc, err, needle);
        fail();
    }
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_bad("", "empty");
    expect_bad("0", "expected NODE:CPUS");
    expect_bad("a:1", "expected NODE:CPUS");
    expect_bad("64:1", "expected NODE:CPUS");
    expect_bad("0:", "expected a CPU number");
    expect_bad("0:1,", "expected a CPU number");
    expect_bad("0:1,,2", "expected a CPU number");
    expect_bad("0:3-1", "bad CPU range");
    expect_bad("0:1-", "bad CPU range");
    expect_bad("0:1;0:2", "node 0 is declared twice");
    expect_bad("0:0-2;1:2-3", "CPU 2 is in two nodes");
    expect_bad("0:0;1:9", "CPU 9 is not in this process's allowed set (0-7)");
    expect_bad("0:0;1:1;", "unexpected ';'");
    expect_bad("0:0 ;1:1", "unexpected ' '");
    expect_bad("0:0-1x", "unexpected 'x'");
    expect_bad("0:-1", "expected a CPU number");
}

static void test_plan_spreads_over_nodes(void **state)
{
    (void)state;
    cpu_set_t allowed = cpus_0_7();
    ro_topology_t t;
    char err[256] = "";
    assert_int_equal(ro__topology_parse(&t, "0:0-3;1:4-7", &allowed, "T", err, sizeof err), 0);
    ro_worker_plan_t plan[16];
    int groups[RO_TOPO_MAX_NODES], ngroups = 0;

    /* Two workers: one per node, two groups. */
    assert_int_equal(ro__topology_plan(&t, 2, false, plan, groups, &ngroups), 0);
    assert_int_equal(ngroups, 2);
    assert_int_equal(groups[0], 0);
    assert_int_equal(groups[1], 1);
    assert_int_equal(plan[0].cpu, 0);
    assert_int_equal(plan[0].group, 0);
    assert_int_equal(plan[1].cpu, 4);
    assert_int_equal(plan[1].group, 1);

    /* Eight: every CPU once, alternating nodes, each worker in its node's
     * group. */
    assert_int_equal(ro__topology_plan(&t, 8, false, plan, groups, &ngroups), 0);
    assert_int_equal(ngroups, 2);
    int seen[8] = {0};
    for (int w = 0; w < 8; w++) {
        int cpu = plan[w].cpu;
        assert_true(cpu >= 0 && cpu < 8);
        seen[cpu]++;
        assert_int_equal(groups[plan[w].group], cpu < 4 ? 0 : 1);
        assert_int_equal(plan[w].group, w % 2);
    }
    for (int c = 0; c < 8; c++)
        assert_int_equal(seen[c], 1);

    /* One worker: one group only. */
    assert_int_equal(ro__topology_plan(&t, 1, false, plan, groups, &ngroups), 0);
    assert_int_equal(ngroups, 1);
    ro__topology_free(&t);
}

static void test_plan_uneven_nodes(void **state)
{
    (void)state;
    cpu_set_t allowed = cpus_0_7();
    ro_topology_t t;
    char err[256] = "";
    assert_int_equal(ro__topology_parse(&t, "0:0;1:1-4", &allowed, "T", err, sizeof err), 0);
    ro_worker_plan_t plan[8];
    int groups[RO_TOPO_MAX_NODES], ngroups = 0;
    /* Node 0 has one CPU: the rest go to node 1, none doubles up. */
    assert_int_equal(ro__topology_plan(&t, 5, false, plan, groups, &ngroups), 0);
    int cpus[5];
    for (int w = 0; w < 5; w++)
        cpus[w] = plan[w].cpu;
    int want[] = {0, 1, 2, 3, 4};
    for (int w = 0; w < 5; w++) {
        bool found = false;
        for (int k = 0; k < 5; k++)
            found |= cpus[k] == want[w];
        assert_true(found);
    }
    ro__topology_free(&t);
}

static void test_oversubscription_refused(void **state)
{
    (void)state;
    cpu_set_t allowed = cpus_0_7();
    ro_topology_t t;
    char err[256] = "";
    assert_int_equal(ro__topology_parse(&t, "0:0-1;1:2-3", &allowed, "T", err, sizeof err), 0);
    ro_worker_plan_t plan[16];
    int groups[RO_TOPO_MAX_NODES], ngroups = 0;
    assert_int_equal(ro__topology_plan(&t, 5, false, plan, groups, &ngroups), RO_ERANGE);
    assert_int_equal(ro__topology_plan(&t, 0, false, plan, groups, &ngroups), RO_EINVAL);
    /* --overcommit: workers wrap round the CPUs, still within their node. */
    assert_int_equal(ro__topology_plan(&t, 8, true, plan, groups, &ngroups), 0);
    int per_cpu[4] = {0};
    for (int w = 0; w < 8; w++) {
        per_cpu[plan[w].cpu]++;
        assert_int_equal(groups[plan[w].group], plan[w].cpu < 2 ? 0 : 1);
    }
    for (int c = 0; c < 4; c++)
        assert_int_equal(per_cpu[c], 2);
    ro__topology_free(&t);
}

static void test_restrict_to_node(void **state)
{
    (void)state;
    cpu_set_t allowed = cpus_0_7();
    ro_topology_t t;
    char err[256] = "";
    assert_int_equal(ro__topology_parse(&t, "0:0-3;1:4-7", &allowed, "T", err, sizeof err), 0);
    assert_int_equal(ro__topology_restrict(&t, 5, err, sizeof err), RO_ENOENT);
    assert_non_null(strstr(err, "--numa-node 5"));
    assert_non_null(strstr(err, "nodes: 0, 1"));
    assert_int_equal(ro__topology_restrict(&t, 1, err, sizeof err), 0);
    assert_int_equal(t.nnodes, 1);
    assert_int_equal(t.ncpus, 4);
    assert_int_equal(t.nodes[0].id, 1);
    ro_worker_plan_t plan[8];
    int groups[RO_TOPO_MAX_NODES], ngroups = 0;
    assert_int_equal(ro__topology_plan(&t, 4, false, plan, groups, &ngroups), 0);
    assert_int_equal(ngroups, 1);
    assert_int_equal(groups[0], 1);
    for (int w = 0; w < 4; w++)
        assert_int_equal(plan[w].cpu, 4 + w);
    assert_int_equal(ro__topology_plan(&t, 5, false, plan, groups, &ngroups), RO_ERANGE);
    ro__topology_free(&t);
}

static void test_load_from_environment(void **state)
{
    (void)state;
    int a, b;
    if (!two_allowed(&a, &b))
        skip();
    char spec[64], err[256] = "";
    snprintf(spec, sizeof spec, "0:%d;1:%d", a, b);
    setenv(RO_TOPOLOGY_ENV, spec, 1);
    ro_topology_t t;
    assert_int_equal(ro__topology_load(&t, NULL, NULL, err, sizeof err), 0);
    assert_true(t.fake);
    assert_int_equal(t.nnodes, 2);
    assert_int_equal(t.ncpus, 2);
    ro__topology_free(&t);

    /* An explicit spec wins over the variable; errors name their source. */
    assert_int_equal(ro__topology_load(&t, "0:100000", "--topology", err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "--topology"));
    setenv(RO_TOPOLOGY_ENV, "7:zzz", 1);
    assert_int_equal(ro__topology_load(&t, NULL, NULL, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, RO_TOPOLOGY_ENV));

    /* Unset or empty: the OS's topology. */
    setenv(RO_TOPOLOGY_ENV, "", 1);
    assert_int_equal(ro__topology_load(&t, NULL, NULL, err, sizeof err), 0);
    assert_false(t.fake);
    assert_true(t.ncpus >= 2);
    ro__topology_free(&t);
    unsetenv(RO_TOPOLOGY_ENV);
}

/* Workers planned over two declared nodes pin themselves; the OS reports
 * each worker thread's mask as exactly its CPU. */
static void test_pinning_read_back(void **state)
{
    (void)state;
    int a, b;
    if (!two_allowed(&a, &b))
        skip();
    char spec[64], err[256] = "";
    snprintf(spec, sizeof spec, "0:%d;1:%d", a, b);
    ro_topology_t t;
    assert_int_equal(ro__topology_load(&t, spec, "--topology", err, sizeof err), 0);
    ro_worker_plan_t plan[2];
    int groups[RO_TOPO_MAX_NODES], ngroups = 0;
    assert_int_equal(ro__topology_plan(&t, 2, false, plan, groups, &ngroups), 0);
    assert_int_equal(ngroups, 2);
    ro_sched_t *s;
    assert_int_equal(ro__sched_new(&s, ngroups, groups, plan, 2), 0);
    assert_int_equal(ro__sched_ngroups(s), 2);
    assert_int_equal(ro__sched_start(s), 0);
    ro__sched_wait_pinned(s);
    assert_int_equal(ro__sched_pin_errors(s), 0);
    assert_int_equal(ro__sched_check_affinity(s), 0);
    for (int w = 0; w < 2; w++) {
        int tid = ro__sched_worker_tid(s, w);
        assert_true(tid > 0);
        cpu_set_t got;
        CPU_ZERO(&got);
        assert_int_equal(sched_getaffinity(tid, sizeof got, &got), 0);
        assert_int_equal(CPU_COUNT(&got), 1);
        assert_true(CPU_ISSET(w == 0 ? a : b, &got));
        assert_int_equal(ro__sched_worker_cpu(s, w), w == 0 ? a : b);
        assert_int_equal(ro__sched_queue(s, w)->numa_node, w);
    }
    ro__sched_stop(s);
    ro__sched_free(s);
    ro__topology_free(&t);
}

/* The node of the page holding p, as the kernel reports it. */
static int page_node(void *p)
{
#if RO_HAVE_NUMA
    int node = -1;
    if (get_mempolicy(&node, NULL, 0, p, MPOL_F_NODE | MPOL_F_ADDR) != 0)
        return -1;
    return node;
#else
    (void)p;
    return -1;
#endif
}

static void test_numa_alloc_read_back(void **state)
{
    (void)state;
    if (!ro__numa_available())
        skip();
    size_t bytes = 3 * 4096 + 100;
    char *p = ro__numa_alloc(bytes, 0);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    for (size_t i = 0; i < bytes; i++)
        assert_int_equal(p[i], 0);
    assert_int_equal(page_node(p), 0);
    assert_int_equal(page_node(p + bytes - 1), 0);
    assert_int_equal(ro__numa_bound_node(p), 0);
    assert_int_equal(ro__numa_misplaced(p, bytes, 0), 0);
    ro__numa_free(p, bytes);

    /* Heap memory carries no node policy. */
    char *h = malloc(100);
    assert_int_equal(ro__numa_bound_node(h), -1);
    free(h);
}

/* A shard initialised for a declared node: its exchange buffers are bound
 * to the real node holding that node's CPUs, page by page. */
static void test_shard_buffers_on_node(void **state)
{
    (void)state;
    int a = 0, b = 0; /* skip() does not return, but clang cannot tell */
    if (!ro__numa_available() || !two_allowed(&a, &b))
        skip();
    char spec[64], err[256] = "";
    snprintf(spec, sizeof spec, "0:%d;1:%d", a, b);
    ro_topology_t t;
    assert_int_equal(ro__topology_load(&t, spec, "--topology", err, sizeof err), 0);
    int mem = t.nodes[ro__topology_find(&t, 1)].mem_node;
    assert_true(mem >= 0);

    ro_env_kind_t kind;
    assert_int_equal(ro__env_open(&kind, "cartpole", err, sizeof err), 0);
    ro_env_shard_t sh;
    assert_int_equal(ro__env_shard_init_on(&sh, kind.vt, NULL, 0, 0, 32, 1, mem, err, sizeof err),
                     0);
    assert_true(sh.mem_bytes > 0);
    assert_int_equal(sh.mem_node, mem);
    assert_int_equal(page_node(sh.xchg.obs), mem);
    assert_int_equal(page_node(sh.xchg.act_i), mem);
    assert_int_equal(ro__numa_bound_node(sh.xchg.obs), mem);
    assert_int_equal(ro__numa_misplaced(sh.mem, sh.mem_bytes, mem), 0);
    ro__env_shard_destroy(&sh);

    /* Without a node: the heap, as before. */
    assert_int_equal(ro__env_shard_init_on(&sh, kind.vt, NULL, 0, 0, 4, 1, -1, err, sizeof err), 0);
    assert_int_equal(sh.mem_bytes, 0);
    ro__env_shard_destroy(&sh);
    ro__env_close(&kind);
    ro__topology_free(&t);
}

/* A whole node on two declared nodes: two worker groups, pins verified by
 * the node itself, every shard and lane buffer read back on its node. */
static void test_node_on_declared_nodes(void **state)
{
    (void)state;
    int a, b;
    if (!two_allowed(&a, &b))
        skip();
    char spec[64], err[512] = "";
    snprintf(spec, sizeof spec, "0:%d;1:%d", a, b);
    ro_config_t c;
    ro__config_defaults(&c);
    c.topology = spec;
    c.num_envs = 64;
    c.steps = 64 * 50;
    c.seconds = 0;
    c.quiet = true;
    ro_node_t *n;
    assert_int_equal(ro_node_new(&n, &c, err, sizeof err), 0);
    assert_int_equal(ro_node_run(n), 0);
    ro_summary_t s;
    ro_node_summary(n, &s);
    ro_node_free(n);
    assert_int_equal(s.steps, 64 * 50);
    assert_int_equal(s.numa_nodes, 2);
    assert_int_equal(s.workers, 2);
    assert_true(s.topology_declared);
    assert_int_equal(s.affinity_mismatches, 0);
    assert_int_equal(s.worker_cpu[0], a);
    assert_int_equal(s.worker_cpu[1], b);
    assert_int_equal(s.worker_node[0], 0);
    assert_int_equal(s.worker_node[1], 1);
    if (ro__numa_available())
        assert_true(s.mem_blocks >= 2 + 2 * 2); /* shards + two blocks per lane */
    assert_int_equal(s.mem_misplaced, 0);

    /* More workers than the declared CPUs: refused, naming the fix. */
    c.workers = 3;
    assert_int_not_equal(ro_node_new(&n, &c, err, sizeof err), 0);
    assert_non_null(strstr(err, "--workers 3"));
    assert_non_null(strstr(err, "--overcommit"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_two_nodes),
        cmocka_unit_test(test_parse_lists_and_order),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_plan_spreads_over_nodes),
        cmocka_unit_test(test_plan_uneven_nodes),
        cmocka_unit_test(test_oversubscription_refused),
        cmocka_unit_test(test_restrict_to_node),
        cmocka_unit_test(test_load_from_environment),
        cmocka_unit_test(test_pinning_read_back),
        cmocka_unit_test(test_numa_alloc_read_back),
        cmocka_unit_test(test_shard_buffers_on_node),
        cmocka_unit_test(test_node_on_declared_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
