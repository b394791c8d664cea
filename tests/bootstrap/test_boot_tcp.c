/* tests/bootstrap/test_boot_tcp.c - the tcp bootstrap (jobs started by
 * torchrun or srun, without MPI), run by tcp_launch (or alone for the error
 * paths of one process). What to expect comes from the launcher's variables
 * (RANK/WORLD_SIZE or SLURM_PROCID/SLURM_NTASKS; DTRAIN_TEST_RANKS_PER_HOST
 * when tcp_launch -H pretends to use several hosts).
 *
 *   boot             the bootstrap alone: rank, size, hosts, allgather of
 *                    several sizes (in and out of place), barrier, close
 *   attrs            dt_init over it: world and rank_list communicators with
 *                    seed 003's attributes, collectives between processes
 *                    refused (DT_ERR_UNSUPPORTED naming the mpi transport)
 *                    and served on groups of one, dt_finalize, a second run
 *   expect-fail ST S dt_init fails with status ST and a message containing S
 *   unreachable      rank 1 of 2 whose rank 0 never listens: a timeout
 *                    naming the address, within the bootstrap timeout
 *   alone-root       rank 0 of 3 whose peers never come: a timeout naming them
 *   calls-differ     ranks exchange different sizes: DT_ERR_MISMATCH on every
 *                    rank, later calls refused
 *   peer-exit        the last rank exits after joining: the others' next
 *                    exchange fails naming it
 *   wd-kill          dt_init, then rank 1 is killed: the watchdog reports it
 *                    (run under expect_fail.sh)
 *   wd-stall         rank 0 creates a communicator rank 1 never joins: the
 *                    stall report (under expect_fail.sh)
 *   wd-kill-last     dt_init, then the last rank is killed while the others
 *                    sleep outside any dtrain call: run on pretended hosts
 *                    (-H), every rank on another host learns it over the
 *                    watchdogs' side channel and ends at once */
#define _POSIX_C_SOURCE 200809L
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "bootstrap/bootstrap.h"
#include "testutil.h"

static int N = 1, ME = 0, PER_HOST = 0;

static int env_int(const char *a, const char *b, int dflt) {
    const char *v = getenv(a);
    if (!v && b) v = getenv(b);
    return v && *v ? atoi(v) : dflt;
}

static void expectations(void) {
    N = env_int("WORLD_SIZE", "SLURM_NTASKS", 1);
    ME = env_int("RANK", "SLURM_PROCID", 0);
    PER_HOST = env_int("DTRAIN_TEST_RANKS_PER_HOST", NULL, N);
}
static int host_of(int r) { return r / PER_HOST; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static int status_of(const char *name) {
    for (int s = 0; s >= DT_ERR_INTERNAL; s--)
        if (strcmp(dt_status_str(s), name) == 0) return s;
    return 1;
}

/* ---- boot: the bootstrap alone ---------------------------------------------- */

static void fill(unsigned char *p, size_t n, int r) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(r * 31 + i * 7 + 1);
}

static int check_all(const unsigned char *all, size_t n) {
    unsigned char *want = malloc(n + 1);
    int ok = 1;
    for (int r = 0; r < N && ok; r++) {
        fill(want, n, r);
        ok = memcmp(all + (size_t)r * n, want, n) == 0;
    }
    free(want);
    return ok;
}

static int t_boot(void) {
    const dt_boot_ops *tcp = dt_boot_find("tcp");
    CHECK(tcp != NULL, "no tcp bootstrap in this build");
    if (!tcp) return dt_test_finish("boot_tcp");
    CHECK(tcp->detect(), "tcp bootstrap does not detect the launcher's variables");
    CHECK_OK(dt_boot_open(tcp));
    const dt_boot *b = dt_boot_get();
    CHECK(b && b->rank == ME && b->size == N, "rank/size %d/%d, launcher says %d/%d", b ? b->rank : -1,
          b ? b->size : -1, ME, N);
    if (!b) return dt_test_finish("boot_tcp");
    dt_test_rank = ME;
    int lr = ME % PER_HOST, ln = PER_HOST;
    if (host_of(N - 1) == host_of(ME)) ln = N - host_of(ME) * PER_HOST;
    CHECK(b->local_rank == lr && b->local_size == ln, "local rank/size %d/%d, want %d/%d", b->local_rank,
          b->local_size, lr, ln);
    CHECK(b->nhosts == host_of(N - 1) + 1, "%d hosts, want %d", b->nhosts, host_of(N - 1) + 1);
    for (int r = 0; r < N; r++) CHECK(b->host[r] == host_of(r), "host of rank %d is %d, want %d", r, b->host[r], host_of(r));
    CHECK_ERR(dt_boot_open(tcp), DT_ERR_STATE, "already open");

    static const size_t sizes[] = {0, 1, 8, 3000, 200000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *mine = malloc(n + 1), *all = malloc((size_t)N * n + 1);
        fill(mine, n, ME);
        memset(all, 0xee, (size_t)N * n + 1);
        CHECK_OK(dt_boot_allgather(mine, all, n));
        CHECK(check_all(all, n), "allgather of %zu bytes: wrong data", n);
        /* in place: my part already where it belongs */
        memset(all, 0xee, (size_t)N * n + 1);
        fill(all + (size_t)ME * n, n, ME);
        CHECK_OK(dt_boot_allgather(all + (size_t)ME * n, all, n));
        CHECK(check_all(all, n), "in-place allgather of %zu bytes: wrong data", n);
        free(mine);
        free(all);
    }
    for (int i = 0; i < 3; i++) CHECK_OK(dt_boot_barrier());
    CHECK_OK(dt_boot_close(1));
    CHECK(dt_boot_get() == NULL, "still open after close");
    CHECK_ERR(dt_boot_barrier(), DT_ERR_STATE, "no bootstrap");
    return dt_test_finish("boot_tcp");
}

/* ---- attrs: dt_init over the tcp bootstrap ---------------------------------- */

/* Checks c against the group of `ranks` (this rank's group, sorted) with id gid of ng. */
static void check_comm(dt_comm *c, const int *mem, int n, int gid, int ng, const char *what) {
    dt_comm_info info;
    memset(&info, 0x7f, sizeof info);
    CHECK_OK(dt_comm_info_get(c, &info));
    int r = 0, lr = 0, ln = 0;
    for (int i = 0; i < n; i++) {
        if (mem[i] == ME) r = i;
        if (host_of(mem[i]) == host_of(ME)) { lr += mem[i] < ME; ln++; }
    }
    CHECK(info.rank == r && info.size == n, "%s: rank/size %d/%d, want %d/%d", what, info.rank, info.size, r, n);
    CHECK(info.local_rank == lr && info.local_size == ln, "%s: local_rank/size %d/%d, want %d/%d", what,
          info.local_rank, info.local_size, lr, ln);
    CHECK(info.world_rank == ME && info.world_size == N, "%s: world_rank/size %d/%d", what, info.world_rank,
          info.world_size);
    CHECK(info.group_id == gid && info.group_size == ng, "%s: group_id/size %d/%d, want %d/%d", what, info.group_id,
          info.group_size, gid, ng);
    for (int i = 0; i < n; i++)
        CHECK(dt_comm_world_rank_of(c, i) == mem[i], "%s: member %d is %d, want %d", what, i,
              dt_comm_world_rank_of(c, i), mem[i]);
}

/* Collectives on c: refused between processes, served on a group of one. */
static void check_collectives(dt_comm *c, const char *what) {
    float x[4] = {1, 2, 3, 4}, y[4] = {0};
    int n = dt_comm_size(c);
    if (n > 1) {
        CHECK_ERR(dt_allreduce(x, y, 4, DT_F32, DT_SUM, c), DT_ERR_UNSUPPORTED, "mpi transport");
        CHECK(y[0] == 0, "%s: refused allreduce wrote its output", what);
        CHECK_ERR(dt_broadcast(x, y, 4, DT_F32, dt_comm_world_rank_of(c, 0), c), DT_ERR_UNSUPPORTED, "void");
        CHECK_ERR(dt_barrier(c), DT_ERR_UNSUPPORTED, "moves no data between processes");
        dt_work *w = NULL;
        CHECK_OK(dt_allreduce_async(x, y, 4, DT_F32, DT_SUM, c, &w));
        if (w) {
            CHECK_ERR(dt_work_wait(w), DT_ERR_UNSUPPORTED, "mpi transport");
            dt_work_free(w);
        }
    } else {
        CHECK_OK(dt_allreduce(x, y, 4, DT_F32, DT_AVG, c));
        CHECK(y[0] == 1 && y[3] == 4, "%s: allreduce on one rank gave %g..%g", what, y[0], y[3]);
        CHECK_OK(dt_barrier(c));
    }
}

static void t_attrs_once(void) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    CHECK(w != NULL, "no world");
    if (!w) return;
    dt_test_rank = ME;
    CHECK(strcmp(dt_comm_backend(w), "void") == 0, "world backend '%s', want void", dt_comm_backend(w));
    int all[256];
    for (int i = 0; i < N; i++) all[i] = i;
    check_comm(w, all, N, 0, 1, "world");
    check_collectives(w, "world");

    /* rank_lists: the first half and the rest; every rank alone; the last
     * two ranks only; seed 003's [[1,2,3],[0]] */
    char text[2048];
    size_t k = 0;
    int h = (N + 1) / 2;
    k += (size_t)snprintf(text + k, sizeof text - k, "[[");
    for (int i = 0; i < h; i++) k += (size_t)snprintf(text + k, sizeof text - k, "%s%d", i ? "," : "", h - 1 - i);
    k += (size_t)snprintf(text + k, sizeof text - k, "]%s", N > h ? ",[" : "]");
    for (int i = h; i < N; i++) k += (size_t)snprintf(text + k, sizeof text - k, "%s%d", i > h ? "," : "", i);
    if (N > h) snprintf(text + k, sizeof text - k, "]]");
    dt_comm *c = NULL;
    CHECK_OK(dt_comm_from_rank_list_str(text, &c));
    if (c) {
        int first = ME < h, n = first ? h : N - h;
        check_comm(c, all + (first ? 0 : h), n, first ? 0 : 1, N > h ? 2 : 1, text);
        check_collectives(c, text);
    }
    k = 0;
    k += (size_t)snprintf(text + k, sizeof text - k, "[");
    for (int i = 0; i < N; i++) k += (size_t)snprintf(text + k, sizeof text - k, "%s[%d]", i ? "," : "", i);
    snprintf(text + k, sizeof text - k, "]");
    CHECK_OK(dt_comm_from_rank_list_str(text, &c));
    if (c) {
        check_comm(c, &ME, 1, ME, N, "solo");
        check_collectives(c, "solo");
    }
    if (N >= 2) {
        snprintf(text, sizeof text, "[[%d,%d]]", N - 1, N - 2);
        CHECK_OK(dt_comm_from_rank_list_str(text, &c));
        if (c && ME >= N - 2) check_comm(c, all + N - 2, 2, 0, 1, text);
        if (c && ME < N - 2) check_comm(c, &ME, 1, -1, 1, text);
    }
    if (N == 4) {
        CHECK_OK(dt_comm_from_rank_list_str("[[1,2,3],[0]]", &c));
        if (c && ME == 0) check_comm(c, all, 1, 1, 2, "seed 003");
        if (c && ME > 0) check_comm(c, all + 1, 3, 0, 2, "seed 003");
    }
    /* ranks that pass different rank_lists: the same error everywhere */
    snprintf(text, sizeof text, ME == 0 ? "[[0]]" : "[[%d]]", N - 1);
    if (N > 1) CHECK_ERR(dt_comm_from_rank_list_str(text, &c), DT_ERR_MISMATCH, "different rank_lists");
    /* memory every member could load: plain memory here */
    void *p = NULL;
    CHECK_OK(dt_comm_alloc_shared(w, 4096, &p));
    CHECK(p != NULL, "dt_comm_alloc_shared gave NULL");
    CHECK_OK(dt_comm_free_shared(w, p));
    CHECK_OK(dt_finalize());
    CHECK(!dt_is_initialized(), "initialised after dt_finalize");
}

static int t_attrs(void) {
    t_attrs_once();
    /* unlike MPI, the tcp bootstrap may start again */
    t_attrs_once();
    return dt_test_finish("attrs_tcp");
}

/* ---- error paths ---------------------------------------------------------------- */

static int t_expect_fail(const char *st, const char *sub) {
    dt_clear_error();
    int rc = dt_init();
    CHECK(rc == status_of(st) && strstr(dt_last_error(), sub), "dt_init -> %s '%s', want %s containing '%s'",
          dt_status_str(rc), dt_last_error(), st, sub);
    CHECK(!dt_is_initialized(), "initialised after a failed dt_init");
    if (rc == DT_OK) dt_finalize();
    printf("rank %d: %s\n", ME, dt_last_error());
    return dt_test_finish("expect_fail");
}

static int t_timeout(int rank, int size, const char *want) {
    char port[16], sub[128];
    snprintf(port, sizeof port, "%d", free_port());
    setenv("RANK", rank ? "1" : "0", 1);
    setenv("WORLD_SIZE", size == 2 ? "2" : "3", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
    setenv("DTRAIN_BOOTSTRAP_TIMEOUT", "1", 1);
    snprintf(sub, sizeof sub, want, port);
    double t0 = now();
    CHECK_ERR(dt_init(), DT_ERR_TIMEOUT, sub);
    double t = now() - t0;
    CHECK(t >= 0.9 && t < 10, "gave up after %.2f s (timeout 1 s)", t);
    printf("%s (after %.2f s)\n", dt_last_error(), t);
    return dt_test_finish("timeout");
}

static int t_calls_differ(void) {
    CHECK_OK(dt_boot_open(dt_boot_find("tcp")));
    dt_test_rank = ME;
    unsigned char mine[16] = {0}, all[16 * 256];
    CHECK_OK(dt_boot_allgather(mine, all, 4));
    CHECK_ERR(dt_boot_allgather(mine, all, ME == N - 1 ? 16 : 8), DT_ERR_MISMATCH, "made different calls");
    CHECK_ERR(dt_boot_barrier(), DT_ERR_STATE, "failed earlier");
    dt_boot_close(0);
    return dt_test_finish("calls_differ");
}

static int t_peer_exit(void) {
    CHECK_OK(dt_boot_open(dt_boot_find("tcp")));
    dt_test_rank = ME;
    if (ME == N - 1) _exit(0); /* gone without closing */
    char want[32];
    snprintf(want, sizeof want, "rank %d", N - 1);
    CHECK_ERR(dt_boot_barrier(), DT_ERR_BACKEND, want);
    printf("rank %d: %s\n", ME, dt_last_error());
    dt_boot_close(0);
    return dt_test_finish("peer_exit");
}

static int t_watchdog(int stall, int victim) {
    if (dt_init()) { fprintf(stderr, "dt_init: %s\n", dt_last_error()); return 1; }
    dt_comm *c = NULL;
    if (ME == victim) {
        if (!stall) raise(SIGKILL);
        sleep(60);
        return 1;
    }
    if (stall) dt_comm_from_rank_list_str("[[0,1]]", &c);
    else sleep(60);
    fprintf(stderr, "rank %d: still here (the watchdog did not end the job)\n", ME);
    return 1;
}

int main(int argc, char **argv) {
    expectations();
    const char *mode = argc > 1 ? argv[1] : "boot";
    if (!strcmp(mode, "boot")) return t_boot();
    if (!strcmp(mode, "attrs")) return t_attrs();
    if (!strcmp(mode, "expect-fail") && argc == 4) return t_expect_fail(argv[2], argv[3]);
    if (!strcmp(mode, "unreachable"))
        return t_timeout(1, 2, "could not connect to rank 0 at 127.0.0.1:%s within 1 s");
    if (!strcmp(mode, "alone-root")) return t_timeout(0, 3, "2 of 3 ranks did not join within 1 s (DTRAIN_BOOTSTRAP_TIMEOUT)%.0s: ranks 1,2");
    if (!strcmp(mode, "calls-differ")) return t_calls_differ();
    if (!strcmp(mode, "peer-exit")) return t_peer_exit();
    if (!strcmp(mode, "wd-kill")) return t_watchdog(0, 1);
    if (!strcmp(mode, "wd-stall")) return t_watchdog(1, 1);
    if (!strcmp(mode, "wd-kill-last")) return t_watchdog(0, N - 1);
    fprintf(stderr, "usage: test_boot_tcp boot|attrs|expect-fail STATUS TEXT|unreachable|alone-root|calls-differ|"
                    "peer-exit|wd-kill|wd-stall|wd-kill-last\n");
    return 2;
}
