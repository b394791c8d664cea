/* coll_seed: the seed tables as tests. Rank r holds r+1 (in f32, i32 and f16).
 * At 4 ranks: AR() on the world and AR([[0,1,2,3]]) -> 10 everywhere;
 * AR([[0,1],[2,3]]) -> 3,3,7,7; AR([[0,1,2],[3]]) -> 6,6,6,4; AR([[0,1,2]]) ->
 * 6,6,6,4 (rank 3 standalone). At other sizes the same lists where valid, with
 * the values derived from the groups by hand-written rules. */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"

static void ar_all_dtypes(dt_comm *c, const char *name, int want) {
    float f = (float)(ME + 1), fo = -1;
    int32_t i = ME + 1, io = -1;
    uint16_t h = dt_f32_to_f16((float)(ME + 1));
    CHECK_OK(dt_allreduce(&f, &fo, 1, DT_F32, DT_SUM, c));
    CHECK_OK(dt_allreduce(&i, &io, 1, DT_I32, DT_SUM, c));
    CHECK_OK(dt_allreduce(&h, &h, 1, DT_F16, DT_SUM, c)); /* in place */
    CHECK(fo == (float)want, "AR(%s) f32 on rank %d = %g, want %d", name, ME, (double)fo, want);
    CHECK(io == want, "AR(%s) i32 on rank %d = %d, want %d", name, ME, io, want);
    CHECK(dt_f16_to_f32(h) == (float)want, "AR(%s) f16 on rank %d = %g, want %d", name, ME,
          (double)dt_f16_to_f32(h), want);
}

int main(void) {
    coll_init();
    dt_comm *c = NULL;
    if (W == 4) {
        static const int t_world[4] = {10, 10, 10, 10}, t_0123[4] = {10, 10, 10, 10},
                         t_01_23[4] = {3, 3, 7, 7}, t_012_3[4] = {6, 6, 6, 4},
                         t_012[4] = {6, 6, 6, 4};
        ar_all_dtypes(dt_comm_world(), "world", t_world[ME]);
        CHECK_OK(dt_comm_from_rank_list_str("[[0,1,2,3]]", &c));
        ar_all_dtypes(c, "[[0,1,2,3]]", t_0123[ME]);
        CHECK_OK(dt_comm_from_rank_list_str("[[0,1],[2,3]]", &c));
        ar_all_dtypes(c, "[[0,1],[2,3]]", t_01_23[ME]);
        CHECK_OK(dt_comm_from_rank_list_str("[[0,1,2],[3]]", &c));
        ar_all_dtypes(c, "[[0,1,2],[3]]", t_012_3[ME]);
        CHECK_OK(dt_comm_from_rank_list_str("[[0,1,2]]", &c));
        ar_all_dtypes(c, "[[0,1,2]]", t_012[ME]);
        /* the same again from the cache, interleaved with the world */
        CHECK_OK(dt_comm_from_rank_list_str("[[1,0],[3,2]]", &c));
        ar_all_dtypes(c, "[[1,0],[3,2]]", t_01_23[ME]);
        ar_all_dtypes(dt_comm_world(), "world", t_world[ME]);
    } else {
        /* world: 1 + ... + W */
        ar_all_dtypes(dt_comm_world(), "world", W * (W + 1) / 2);
        if (W >= 2) {
            CHECK_OK(dt_comm_from_rank_list_str("[[0,1]]", &c)); /* others standalone */
            ar_all_dtypes(c, "[[0,1]]", ME < 2 ? 3 : ME + 1);
            CHECK_OK(dt_comm_from_rank_list_str("[[1],[0]]", &c));
            ar_all_dtypes(c, "[[1],[0]]", ME + 1);
        } else {
            CHECK_OK(dt_comm_from_rank_list_str("[[0]]", &c));
            ar_all_dtypes(c, "[[0]]", 1);
        }
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_seed");
}
