/* mh_attrs HOST1 HOST2 ...: communicator attributes across hosts, run by
 * tests/multihost under tools/multihost/dtrain-hosts with S ranks per host
 * (ranks placed by slot: world rank r on host r / S).
 *
 * The test's own model of the placement comes from the launcher and the
 * command line, not from the library: the hostname each rank must have
 * (argv, the harness's names, in host order), S = world size / number of
 * hosts, checked against OMPI_COMM_WORLD_LOCAL_RANK/LOCAL_SIZE and against
 * every rank's gethostname() (gathered).
 *
 * At 2 hosts x 2 ranks: seed 003's table, exactly (global and
 * [[1,2,3],[0]] attributes). At any placement, for the world and every
 * rank_list of the size: local_rank/local_size count the members of my group
 * on my host (include/dtrain/comm.h), the other attributes as on one host. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>
#include "testutil.h"

static int N, ME, NHOSTS, PER;
static char **NAMES;

static int host_of(int w) { return w / PER; }

/* Members of ME's group in a rank_list text (sorted), group id, group count. */
static int members(const char *text, int *mem, int *gid, int *ngroups) {
    int r[64], l[16], nr = 0, ng = 0;
    CHECK_OK(dt_rank_list_parse(text, r, 64, &nr, l, 16, &ng));
    *ngroups = ng;
    *gid = -1;
    int k = 0, n = 0;
    for (int g = 0; g < ng; g++) {
        int in = 0;
        for (int i = 0; i < l[g]; i++) in |= r[k + i] == ME;
        if (in) {
            *gid = g;
            for (int i = 0; i < l[g]; i++) mem[n++] = r[k + i];
        }
        k += l[g];
    }
    if (n == 0) mem[n++] = ME;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && mem[j - 1] > mem[j]; j--) {
            int t = mem[j]; mem[j] = mem[j - 1]; mem[j - 1] = t;
        }
    return n;
}

/* Every attribute of the communicator of `text` against the model. */
static void check_list(const char *text) {
    int mem[64], gid, ng;
    int n = members(text, mem, &gid, &ng);
    int rank = 0, lrank = 0, lsize = 0;
    for (int i = 0; i < n; i++) {
        if (mem[i] == ME) rank = i;
        if (host_of(mem[i]) == host_of(ME)) {
            if (mem[i] < ME) lrank++;
            lsize++;
        }
    }
    dt_comm *c = NULL;
    CHECK_OK(dt_comm_from_rank_list_str(text, &c));
    if (!c) return;
    dt_comm_info in;
    memset(&in, 0x7f, sizeof in);
    CHECK_OK(dt_comm_info_get(c, &in));
    CHECK(in.rank == rank && in.size == n, "%s: rank/size %d/%d, want %d/%d", text, in.rank, in.size, rank, n);
    CHECK(in.local_rank == lrank && in.local_size == lsize, "%s: local_rank/size %d/%d, want %d/%d (host %d)",
          text, in.local_rank, in.local_size, lrank, lsize, host_of(ME) + 1);
    CHECK(in.world_rank == ME && in.world_size == N, "%s: world_rank/size %d/%d", text, in.world_rank,
          in.world_size);
    CHECK(in.group_id == gid && in.group_size == ng, "%s: group_id/size %d/%d, want %d/%d", text, in.group_id,
          in.group_size, gid, ng);
}

/* Seed 003's table: two machines with two GPUs each, rank_list [[1,2,3],[0]]. */
static void check_seed_table(void) {
    static const int g_local[4][2] = {{0, 2}, {1, 2}, {0, 2}, {1, 2}};
    static const int s_local[4][2] = {{0, 1}, {0, 1}, {0, 2}, {1, 2}};
    static const int s_rank[4][2] = {{0, 1}, {0, 3}, {1, 3}, {2, 3}};
    static const int s_group[4][2] = {{1, 2}, {0, 2}, {0, 2}, {0, 2}};
    dt_comm_info g, s;
    dt_comm *sub = NULL;
    memset(&g, 0x7f, sizeof g);
    memset(&s, 0x7f, sizeof s);
    CHECK_OK(dt_comm_info_get(dt_comm_world(), &g));
    CHECK_OK(dt_comm_from_rank_list_str("[[1,2,3],[0]]", &sub));
    if (sub) CHECK_OK(dt_comm_info_get(sub, &s));
    CHECK(g.local_rank == g_local[ME][0] && g.local_size == g_local[ME][1],
          "seed table: Global local_rank/size on rank %d: %d/%d, want %d/%d", ME, g.local_rank, g.local_size,
          g_local[ME][0], g_local[ME][1]);
    CHECK(g.rank == ME && g.size == 4, "seed table: Global rank/size on rank %d: %d/%d", ME, g.rank, g.size);
    CHECK(g.world_rank == ME && g.world_size == 4, "seed table: Global world_rank/size %d/%d", g.world_rank,
          g.world_size);
    CHECK(s.local_rank == s_local[ME][0] && s.local_size == s_local[ME][1],
          "seed table: Sub local_rank/size on rank %d: %d/%d, want %d/%d", ME, s.local_rank, s.local_size,
          s_local[ME][0], s_local[ME][1]);
    CHECK(s.rank == s_rank[ME][0] && s.size == s_rank[ME][1],
          "seed table: Sub rank/size on rank %d: %d/%d, want %d/%d", ME, s.rank, s.size, s_rank[ME][0],
          s_rank[ME][1]);
    CHECK(s.world_rank == ME && s.world_size == 4, "seed table: Sub world_rank/size %d/%d", s.world_rank,
          s.world_size);
    CHECK(s.group_id == s_group[ME][0] && s.group_size == s_group[ME][1],
          "seed table: Sub group_id/size on rank %d: %d/%d, want %d/%d", ME, s.group_id, s.group_size,
          s_group[ME][0], s_group[ME][1]);
}

int main(int argc, char **argv) {
    int rc = dt_init();
    if (rc != DT_OK) {
        fprintf(stderr, "dt_init: %s %s\n", dt_status_str(rc), dt_last_error());
        return 1;
    }
    N = dt_comm_size(dt_comm_world());
    ME = dt_comm_rank(dt_comm_world());
    dt_test_rank = ME;
    NHOSTS = argc - 1;
    NAMES = argv + 1;
    if (NHOSTS < 2 || N % NHOSTS != 0) {
        fprintf(stderr, "usage: mpirun -np H*S mh_attrs HOST1 .. HOSTH (H >= 2 hosts, S ranks each; got %d names, %d ranks)\n",
                NHOSTS, N);
        return 2;
    }
    PER = N / NHOSTS;

    /* the placement, from the launcher and from every rank's hostname */
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK"), *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    CHECK(lr && ls && atoi(lr) == ME % PER && atoi(ls) == PER,
          "launcher's local rank/size %s/%s on rank %d, want %d/%d (ranks placed by slot, %d per host)",
          lr ? lr : "?", ls ? ls : "?", ME, ME % PER, PER, PER);
    char host[64] = {0}, *all = calloc((size_t)N, 64);
    gethostname(host, sizeof host - 1);
    CHECK(strcmp(host, NAMES[host_of(ME)]) == 0, "rank %d runs on '%s', want '%s'", ME, host,
          NAMES[host_of(ME)]);
    CHECK_OK(dt_allgather(host, all, 64, DT_U8, dt_comm_world()));
    for (int w = 0; w < N; w++) {
        const char *h = all + (size_t)w * 64;
        CHECK(strcmp(h, NAMES[host_of(w)]) == 0, "rank %d says rank %d runs on '%s', want '%s'", ME, w, h,
              NAMES[host_of(w)]);
    }
    for (int a = 0; a < NHOSTS; a++)
        for (int b = a + 1; b < NHOSTS; b++)
            CHECK(strcmp(NAMES[a], NAMES[b]) != 0, "hosts %d and %d have the same name '%s'", a + 1, b + 1,
                  NAMES[a]);
    free(all);

    if (N == 4 && NHOSTS == 2) check_seed_table();
    check_list("[[0,1,2,3]]");
    if (N == 4) {
        static const char *const lists[] = {"[[1,2,3],[0]]", "[[0,1],[2,3]]", "[[0,2],[1,3]]", "[[0,3],[1,2]]",
                                            "[[0,1,2]]",     "[[3,1]]",       "[[2],[0],[3],[1]]"};
        for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) check_list(lists[i]);
    } else {
        char txt[128];
        snprintf(txt, sizeof txt, "[[%d,%d],[0]]", N - 1, 1); /* across hosts when PER < N - 1 */
        if (N > 2) check_list(txt);
    }
    /* global attributes through the same model */
    {
        dt_comm_info g;
        CHECK_OK(dt_comm_info_get(dt_comm_world(), &g));
        CHECK(g.local_rank == ME % PER && g.local_size == PER, "world local_rank/size %d/%d, want %d/%d",
              g.local_rank, g.local_size, ME % PER, PER);
        CHECK(g.group_id == 0 && g.group_size == 1, "world group_id/size %d/%d", g.group_id, g.group_size);
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("mh_attrs");
}
