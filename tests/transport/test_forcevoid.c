/* tests/transport/test_forcevoid.c - DTRAIN_BACKEND=void under an MPI launcher
 * (issue 16, item 10): the world keeps the launcher's ranks (0 and 1 of 2,
 * not two worlds of one that both think they are rank 0 and write the same
 * checkpoint), on the void transport, whose collectives between processes
 * fail at once with DT_ERR_UNSUPPORTED naming the setting; groups of one
 * work. With DTRAIN_BOOTSTRAP=none as well (FORCEVOID_ALONE=1) every process
 * is a world of its own, on purpose. Run under mpiexec with
 * DTRAIN_BACKEND=void (tests/transport/CMakeLists.txt). */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

int main(void) {
    const char *sz = getenv("OMPI_COMM_WORLD_SIZE"), *rk = getenv("OMPI_COMM_WORLD_RANK");
    if (!sz) sz = getenv("PMI_SIZE"), rk = getenv("PMI_RANK");
    int n = sz ? atoi(sz) : 1, me = rk ? atoi(rk) : 0, alone = getenv("FORCEVOID_ALONE") != NULL;
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    if (!w) return dt_test_finish("transport_forcevoid");
    dt_test_rank = dt_comm_rank(w);
    CHECK(strcmp(dt_comm_backend(w), "void") == 0, "world backend '%s'", dt_comm_backend(w));
    if (alone) {
        CHECK(dt_comm_rank(w) == 0 && dt_comm_size(w) == 1, "DTRAIN_BOOTSTRAP=none: rank/size %d/%d, want 0/1",
              dt_comm_rank(w), dt_comm_size(w));
    } else {
        CHECK(dt_comm_rank(w) == me && dt_comm_size(w) == n, "world rank/size %d/%d, the launcher says %d/%d",
              dt_comm_rank(w), dt_comm_size(w), me, n);
    }
    int x = 1, y = 0;
    if (dt_comm_size(w) > 1) {
        CHECK_ERR(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, w), DT_ERR_UNSUPPORTED, "DTRAIN_BACKEND=void under an MPI launcher");
        CHECK_ERR(dt_barrier(w), DT_ERR_UNSUPPORTED, "moves no data between processes");
    } else {
        CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, w));
        CHECK(y == 1, "allreduce over one rank gave %d", y);
    }
    /* every rank alone in its group: collectives are copies */
    dt_comm *solo = NULL;
    char list[256] = "[";
    for (int r = 0; r < dt_comm_size(w); r++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s[%d]", r ? "," : "", r);
    strcat(list, "]");
    CHECK_OK(dt_comm_from_rank_list_str(list, &solo));
    if (solo) {
        y = 0;
        CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, solo));
        CHECK(y == 1 && dt_comm_size(solo) == 1, "allreduce on a group of one gave %d (size %d)", y, dt_comm_size(solo));
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish(alone ? "transport_forcevoid_alone" : "transport_forcevoid");
}
