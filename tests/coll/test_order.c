/* coll_order: floating-point allreduce results do not depend on how the data
 * is cut into calls. With non-exact f32 data (sums round), on the world and
 * every sub-communicator:
 *   - one call over N elements (3 MiB: several chunks of the shared-memory
 *     path when run with a small DTRAIN_SHM_CHUNK_BYTES),
 *   - the same data as a list of irregular, separately allocated tensors,
 *   - a 4 KiB prefix alone (the fingerprint-inline path when checks are on),
 *   - an 80 KiB slice alone,
 *   - an async call of the whole,
 * must agree bit for bit on the common elements, be identical on every rank
 * of the group, and match a float64 reference within p * 2^-23 * sum|x|.
 * This is what makes data-parallel results independent of bucket sizes.
 * With DTRAIN_SHM_ALLREDUCE=0, and for groups spread over several hosts
 * (tests/multihost runs this file on two), MPI's own algorithms reduce and
 * only the last two hold. */
#define _POSIX_C_SOURCE 200809L
#include <strings.h>
#include "coll_common.h"
#include <unistd.h>

/* Every world rank's hostname (64 bytes each), gathered once: the test's own
 * view of which members of a group share a host. */
static char *g_hosts;

static void gather_hosts(void) {
    char me[64] = {0};
    gethostname(me, sizeof me - 1);
    g_hosts = calloc((size_t)W, 64);
    CHECK_OK(dt_allgather(me, g_hosts, 64, DT_U8, dt_comm_world()));
}

static int one_host(const tcomm *t) {
    for (int i = 1; i < t->n; i++)
        if (strcmp(g_hosts + (size_t)t->mem[i] * 64, g_hosts + (size_t)t->mem[0] * 64) != 0) return 0;
    return 1;
}

static float val(int wr, size_t i) { /* deterministic, mixed signs and scales */
    uint64_t h = hash4(0x0dde, (uint64_t)wr, i, 0);
    double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    int e = (int)((h >> 3) % 8) - 4;
    return (float)ldexp(u, e);
}

static void one_comm(const tcomm *t) {
    const size_t N = ((size_t)3 << 20) / 4 + 77; /* 3 MiB + a remainder */
    const size_t PRE = 1024, S0 = 5000, SN = 20000;
    float *whole = malloc(N * 4), *pre = malloc(PRE * 4), *slice = malloc(SN * 4), *as = malloc(N * 4);
    for (size_t i = 0; i < N; i++) whole[i] = as[i] = val(ME, i);
    for (size_t i = 0; i < PRE; i++) pre[i] = val(ME, i);
    for (size_t i = 0; i < SN; i++) slice[i] = val(ME, S0 + i);
    /* the list: irregular tensors, each separately allocated */
    enum { MAXT = 4096 };
    static dt_tensor lt[MAXT];
    int nt = 0;
    for (size_t off = 0; off < N && nt < MAXT; nt++) {
        size_t c = 1 + (size_t)(hash4(7, (uint64_t)nt, 0, 0) % 3000);
        if (c > N - off || nt == MAXT - 1) c = N - off;
        float *p = malloc(c * 4);
        for (size_t i = 0; i < c; i++) p[i] = val(ME, off + i);
        lt[nt] = (dt_tensor){p, c, DT_F32};
        off += c;
    }
    CHECK_OK(dt_allreduce(whole, whole, N, DT_F32, DT_SUM, t->comm));
    CHECK_OK(dt_allreduce_list(lt, lt, nt, DT_SUM, t->comm));
    CHECK_OK(dt_allreduce(pre, pre, PRE, DT_F32, DT_SUM, t->comm));
    CHECK_OK(dt_allreduce(slice, slice, SN, DT_F32, DT_SUM, t->comm));
    dt_work *w = NULL;
    CHECK_OK(dt_allreduce_async(as, as, N, DT_F32, DT_SUM, t->comm, &w));
    CHECK_OK(dt_work_wait(w));
    dt_work_free(w);

    size_t bad_list = 0, off = 0;
    for (int k = 0; k < nt; k++) {
        const float *p = lt[k].data;
        for (size_t i = 0; i < lt[k].count; i++) bad_list += memcmp(&p[i], &whole[off + i], 4) != 0;
        off += lt[k].count;
        free(lt[k].data);
    }
    /* the cut-independence is the shared-memory path's (one host, default on) */
    const char *shm = getenv("DTRAIN_SHM_ALLREDUCE");
    int cut_free = !(shm && (!strcmp(shm, "0") || !strcasecmp(shm, "off") || !strcasecmp(shm, "false") || !strcasecmp(shm, "no")));
    cut_free = cut_free && one_host(t);
    if (cut_free) {
    CHECK(bad_list == 0, "comm %s: %zu of %zu elements of the list differ from the single call", t->name, bad_list, N);
    CHECK(memcmp(as, whole, N * 4) == 0, "comm %s: async and blocking calls differ", t->name);
    CHECK(memcmp(slice, whole + S0, SN * 4) == 0, "comm %s: the 80 KiB slice differs from the single call", t->name);
    if (dt_check_collectives_enabled())
        CHECK(memcmp(pre, whole, PRE * 4) == 0, "comm %s: the 4 KiB prefix (inline path) differs from the single call", t->name);
    }

    /* float64 reference from every member's known inputs */
    double worst = 0;
    size_t over = 0;
    for (size_t i = 0; i < N; i++) {
        double ref = 0, mag = 0;
        for (int m = 0; m < t->n; m++) { double v = val(t->mem[m], i); ref += v; mag += fabs(v); }
        double err = fabs((double)whole[i] - ref), tol = t->n * ldexp(1.0, -23) * mag;
        if (err > tol) over++;
        if (mag > 0 && err / mag > worst) worst = err / mag;
    }
    CHECK(over == 0, "comm %s: %zu elements beyond the float64 tolerance (worst rel %g)", t->name, over, worst);

    /* identical on every rank of the group: min and max of the hash agree */
    CHECK(dt_test_same_bits(whole, N * 4, t->comm) == 1, "comm %s: the ranks of the group hold different results",
          t->name);
    free(whole);
    free(pre);
    free(slice);
    free(as);
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    gather_hosts();
    for (int c = 0; c < nc; c++) one_comm(&tc[c]);
    free(g_hosts);
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_order");
}
