/* comm tests: dt_init / dt_finalize life cycle, world attributes, rank_list
 * parsing, sub-communicator attributes (seed 003 table), pool caching and
 * canonical form, argument errors (identical on every rank), rank_list mismatch.
 *
 * What to expect is read from the launcher's environment, independently of the
 * library: OMPI_COMM_WORLD_SIZE/RANK (or PMI_SIZE/PMI_RANK) present -> backend
 * "mpi" with that size and rank, absent -> standalone "void" world of 1;
 * DTRAIN_BACKEND=void|mpi overrides. All processes run on one host, so local
 * attributes equal the in-communicator ones. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdlib.h>
#include "testutil.h"

static int N = 1, ME = 0, VOID_MODE = 1;

/* status st and a message naming one of the alternatives (dt_test_msg_has) */
#define CHECK_ERRM(expr, st, alts) do { dt_clear_error(); int rc_ = (expr); \
    CHECK(rc_ == (st) && dt_test_msg_has(alts), "%s -> %s (want %s), message '%s' (want one of '%s')", \
          #expr, dt_status_str(rc_), dt_status_str(st), dt_last_error(), alts); } while (0)

/* ---- model of a rank_list: what each attribute must be ---- */
typedef struct {
    int ngroups, lens[16], ranks[64];
} model_t;

static void model_from(model_t *m, const int *ranks, const int *lens, int ngroups) {
    int k = 0;
    m->ngroups = ngroups;
    for (int g = 0; g < ngroups; g++) {
        m->lens[g] = lens[g];
        for (int i = 0; i < lens[g]; i++, k++) m->ranks[k] = ranks[k];
    }
}

/* Sorted members of ME's group (or {ME}), group id (-1 if none). */
static int model_members(const model_t *m, int *mem, int *gid) {
    int k = 0;
    for (int g = 0; g < m->ngroups; g++) {
        int in = 0;
        for (int i = 0; i < m->lens[g]; i++) in |= m->ranks[k + i] == ME;
        if (in) {
            int n = m->lens[g];
            for (int i = 0; i < n; i++) mem[i] = m->ranks[k + i];
            for (int i = 1; i < n; i++) /* insertion sort */
                for (int j = i; j > 0 && mem[j - 1] > mem[j]; j--) {
                    int t = mem[j]; mem[j] = mem[j - 1]; mem[j - 1] = t;
                }
            *gid = g;
            return n;
        }
        k += m->lens[g];
    }
    mem[0] = ME;
    *gid = -1;
    return 1;
}

/* Checks every attribute of c against the model. */
static void check_comm(dt_comm *c, const model_t *m, const char *what) {
    int mem[64], gid;
    int n = model_members(m, mem, &gid), r = 0;
    for (int i = 0; i < n; i++) if (mem[i] == ME) r = i;
    dt_comm_info info;
    memset(&info, 0x7f, sizeof info);
    CHECK_OK(dt_comm_info_get(c, &info));
    CHECK(info.rank == r && info.size == n, "%s: rank/size %d/%d, want %d/%d", what, info.rank,
          info.size, r, n);
    CHECK(info.local_rank == r && info.local_size == n, "%s: local_rank/size %d/%d, want %d/%d",
          what, info.local_rank, info.local_size, r, n);
    CHECK(info.world_rank == ME && info.world_size == N, "%s: world_rank/size %d/%d, want %d/%d",
          what, info.world_rank, info.world_size, ME, N);
    CHECK(info.group_id == gid && info.group_size == m->ngroups,
          "%s: group_id/size %d/%d, want %d/%d", what, info.group_id, info.group_size, gid,
          m->ngroups);
    CHECK(dt_comm_rank(c) == r && dt_comm_size(c) == n, "%s: dt_comm_rank/size %d/%d", what,
          dt_comm_rank(c), dt_comm_size(c));
    /* A one-rank sub-communicator may be served by the void backend under MPI. */
    CHECK(strcmp(dt_comm_backend(c), VOID_MODE ? "void" : "mpi") == 0 ||
              (n == 1 && c != dt_comm_world() && strcmp(dt_comm_backend(c), "void") == 0),
          "%s: backend '%s'", what, dt_comm_backend(c));
    for (int w = 0; w < N; w++) {
        int want = -1;
        for (int i = 0; i < n; i++) if (mem[i] == w) want = i;
        dt_clear_error();
        int got = dt_comm_group_rank(c, w);
        if (want >= 0)
            CHECK(got == want, "%s: dt_comm_group_rank(%d) = %d, want %d", what, w, got, want);
        else
            CHECK(got == DT_ERR_INVALID && dt_last_error()[0] != '\0',
                  "%s: dt_comm_group_rank(%d) of a non-member = %d, message '%s'", what, w, got,
                  dt_last_error());
    }
    CHECK_ERRM(dt_comm_group_rank(c, N), DT_ERR_INVALID, "dt_comm_group_rank");
    CHECK_ERRM(dt_comm_group_rank(c, -1), DT_ERR_INVALID, "dt_comm_group_rank");
    for (int i = 0; i < n; i++)
        CHECK(dt_comm_world_rank_of(c, i) == mem[i], "%s: dt_comm_world_rank_of(%d) = %d, want %d",
              what, i, dt_comm_world_rank_of(c, i), mem[i]);
    CHECK_ERRM(dt_comm_world_rank_of(c, n), DT_ERR_INVALID, "dt_comm_world_rank_of");
    CHECK_ERRM(dt_comm_world_rank_of(c, -1), DT_ERR_INVALID, "dt_comm_world_rank_of");
}

/* ---- pool bookkeeping: canonical keys of the lists created so far ---- */
static char created[64][256];
static int ncreated = 0;
static void canon_key(const model_t *m, char *key, size_t cap) {
    size_t len = 0;
    int k = 0;
    key[0] = '\0';
    for (int g = 0; g < m->ngroups; g++) {
        int tmp[64], n = m->lens[g];
        for (int i = 0; i < n; i++) tmp[i] = m->ranks[k + i];
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && tmp[j - 1] > tmp[j]; j--) {
                int t = tmp[j]; tmp[j] = tmp[j - 1]; tmp[j - 1] = t;
            }
        len += (size_t)snprintf(key + len, cap - len, "[");
        for (int i = 0; i < n; i++) len += (size_t)snprintf(key + len, cap - len, "%d,", tmp[i]);
        len += (size_t)snprintf(key + len, cap - len, "]");
        k += n;
    }
}

/* Creates the comm for `text` (rank_list syntax), checks it against the model
 * (parsed here by the test's own reading of the flat form given), checks that
 * the flat API gives the same pointer and that the pool grew only if new. */
static dt_comm *make(const char *text, const int *ranks, const int *lens, int ngroups) {
    model_t m;
    model_from(&m, ranks, lens, ngroups);
    char key[256];
    canon_key(&m, key, sizeof key);
    int known = 0;
    for (int i = 0; i < ncreated; i++) known |= strcmp(created[i], key) == 0;
    int before = dt_comm_pool_size();
    dt_comm *c = NULL, *c2 = NULL;
    CHECK_OK(dt_comm_from_rank_list_str(text, &c));
    if (!c) return NULL;
    int after = dt_comm_pool_size();
    CHECK(after == before + (known ? 0 : 1), "%s: pool size %d -> %d (list %s)", text, before,
          after, known ? "known" : "new");
    if (!known) snprintf(created[ncreated++], sizeof created[0], "%s", key);
    CHECK_OK(dt_comm_from_rank_list(ranks, lens, ngroups, &c2));
    CHECK(c2 == c, "%s: flat form gave another communicator", text);
    CHECK(dt_comm_pool_size() == after, "%s: pool grew on a cached list", text);
    CHECK(c != dt_comm_world(), "%s: a rank_list returned the world communicator", text);
    check_comm(c, &m, text);
    return c;
}

static void test_parse(void) {
    int r[16], l[8], nr = -1, ng = -1;
    CHECK_OK(dt_rank_list_parse("[[0,1],[2,3]]", r, 16, &nr, l, 8, &ng));
    CHECK(nr == 4 && ng == 2 && l[0] == 2 && l[1] == 2 && r[0] == 0 && r[1] == 1 && r[2] == 2 &&
              r[3] == 3, "parse [[0,1],[2,3]]: nr %d ng %d", nr, ng);
    CHECK_OK(dt_rank_list_parse(" [ [ 3 , 1 ] ,\n\t[0] ] ", r, 16, &nr, l, 8, &ng));
    CHECK(nr == 3 && ng == 2 && l[0] == 2 && l[1] == 1 && r[0] == 3 && r[1] == 1 && r[2] == 0,
          "parse with whitespace: nr %d ng %d ranks %d %d %d", nr, ng, r[0], r[1], r[2]);
    CHECK_OK(dt_rank_list_parse("[[10,200,3000]]", r, 16, &nr, l, 8, &ng));
    CHECK(nr == 3 && ng == 1 && l[0] == 3 && r[0] == 10 && r[1] == 200 && r[2] == 3000,
          "parse multi-digit: %d %d %d", r[0], r[1], r[2]);
    CHECK_OK(dt_rank_list_parse("[[0],[1],[2],[3],[4]]", r, 16, &nr, l, 8, &ng));
    CHECK(nr == 5 && ng == 5 && l[4] == 1 && r[4] == 4, "parse 5 groups: nr %d ng %d", nr, ng);
    /* syntax only: an out-of-range rank parses */
    CHECK_OK(dt_rank_list_parse("[[7]]", r, 16, &nr, l, 8, &ng));
    CHECK(nr == 1 && ng == 1 && r[0] == 7, "parse [[7]]: nr %d r0 %d", nr, r[0]);
    /* exact capacities are enough */
    CHECK_OK(dt_rank_list_parse("[[0,1]]", r, 2, &nr, l, 1, &ng));
    CHECK(nr == 2 && ng == 1, "parse at exact capacity: nr %d ng %d", nr, ng);

    static const char *const bad[] = {"",        "[",        "[[0,1]",   "[0,1]",   "[[0,,1]]",
                                      "[[0,1]]x", "[[a]]",   "[[0 1]]",  "[[0],[1]", "[[0.5]]",
                                      "((0))",   "[[0]][[1]]", "[[,0]]",  "[[0,]]x", "]]"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        dt_clear_error();
        int rc = dt_rank_list_parse(bad[k], r, 16, &nr, l, 8, &ng);
        CHECK(rc == DT_ERR_INVALID && dt_last_error()[0] != '\0',
              "parse('%s') -> %s, message '%s'", bad[k], dt_status_str(rc), dt_last_error());
    }
    CHECK_ERRM(dt_rank_list_parse("[[0,1,2]]", r, 2, &nr, l, 8, &ng), DT_ERR_INVALID,
               "capacity|more than|too many|too small|max|exceed|room|space");
    CHECK_ERRM(dt_rank_list_parse("[[0],[1]]", r, 16, &nr, l, 1, &ng), DT_ERR_INVALID,
               "capacity|more than|too many|too small|max|exceed|room|space");
    CHECK_ERRM(dt_rank_list_parse(NULL, r, 16, &nr, l, 8, &ng), DT_ERR_INVALID, "NULL");
    CHECK_ERRM(dt_rank_list_parse("[[0]]", NULL, 16, &nr, l, 8, &ng), DT_ERR_INVALID, "NULL");
    CHECK_ERRM(dt_rank_list_parse("[[0]]", r, 16, NULL, l, 8, &ng), DT_ERR_INVALID, "NULL");
    CHECK_ERRM(dt_rank_list_parse("[[0]]", r, 16, &nr, NULL, 8, &ng), DT_ERR_INVALID, "NULL");
    CHECK_ERRM(dt_rank_list_parse("[[0]]", r, 16, &nr, l, 8, NULL), DT_ERR_INVALID, "NULL");
}

/* Bad rank_lists: every rank makes the same bad call, gets the same error, and
 * nothing is cached. */
static void test_errors(void) {
    int pool = dt_comm_pool_size();
    dt_comm *c = NULL;
    char txt[128];
    const char *dup = "twice|duplicate|more than once|repeated|already";
    const char *range = "range|world size|world_size|exceed|out of|invalid rank|>=";
    CHECK_ERRM(dt_comm_from_rank_list_str("[[0,0]]", &c), DT_ERR_INVALID, dup);
    CHECK_ERRM(dt_comm_from_rank_list_str("[[0],[0]]", &c), DT_ERR_INVALID, dup);
    if (N >= 2) {
        snprintf(txt, sizeof txt, "[[0,%d],[1,%d]]", N - 1, N - 1);
        CHECK_ERRM(dt_comm_from_rank_list_str(txt, &c), DT_ERR_INVALID, dup);
    }
    snprintf(txt, sizeof txt, "[[0,%d]]", N);
    CHECK_ERRM(dt_comm_from_rank_list_str(txt, &c), DT_ERR_INVALID, range);
    snprintf(txt, sizeof txt, "[[%d]]", N + 100);
    CHECK_ERRM(dt_comm_from_rank_list_str(txt, &c), DT_ERR_INVALID, range);
    {
        int ranks[] = {0, -1}, lens[] = {2};
        CHECK_ERRM(dt_comm_from_rank_list(ranks, lens, 1, &c), DT_ERR_INVALID,
                   "negative|-1|range|out of");
    }
    {
        int ranks[] = {0}, lens[] = {1, 0};
        CHECK_ERRM(dt_comm_from_rank_list(ranks, lens, 2, &c), DT_ERR_INVALID, "empty");
        int lens2[] = {0, 1};
        CHECK_ERRM(dt_comm_from_rank_list(ranks, lens2, 2, &c), DT_ERR_INVALID, "empty");
        int lens3[] = {-1, 2};
        CHECK_ERRM(dt_comm_from_rank_list(ranks, lens3, 2, &c), DT_ERR_INVALID,
                   "empty|negative|length|-1");
        CHECK_ERRM(dt_comm_from_rank_list(ranks, lens, 0, &c), DT_ERR_INVALID,
                   "ngroups|no group|group");
        CHECK_ERRM(dt_comm_from_rank_list(ranks, lens, -3, &c), DT_ERR_INVALID,
                   "ngroups|no group|group");
        int one[] = {1};
        CHECK_ERRM(dt_comm_from_rank_list(NULL, one, 1, &c), DT_ERR_INVALID, "NULL");
        CHECK_ERRM(dt_comm_from_rank_list(ranks, NULL, 1, &c), DT_ERR_INVALID, "NULL");
        CHECK_ERRM(dt_comm_from_rank_list(ranks, one, 1, NULL), DT_ERR_INVALID, "NULL");
    }
    CHECK_ERRM(dt_comm_from_rank_list_str("[[0],[]]", &c), DT_ERR_INVALID, "empty|syntax|expected");
    CHECK_ERRM(dt_comm_from_rank_list_str("[]", &c), DT_ERR_INVALID, "group|empty|syntax|expected");
    CHECK_ERRM(dt_comm_from_rank_list_str("[[0,1]", &c), DT_ERR_INVALID,
               "syntax|expected|unexpected|parse|end");
    CHECK_ERRM(dt_comm_from_rank_list_str(NULL, &c), DT_ERR_INVALID, "NULL");
    CHECK_ERRM(dt_comm_from_rank_list_str("[[0]]", NULL), DT_ERR_INVALID, "NULL");
    CHECK(dt_comm_pool_size() == pool, "failed creations changed the pool size %d -> %d", pool,
          dt_comm_pool_size());

}

/* Ranks that pass different (each valid, each new) rank_lists: DT_ERR_MISMATCH on
 * every rank, nothing cached. (Run before the lists are cached: a cached list is
 * found without communication, so a mismatch can only be seen on creation.) */
static void test_mismatch(void) {
    int pool = dt_comm_pool_size();
    dt_comm *c = NULL;
    /* Ranks that pass different (each valid) rank_lists: DT_ERR_MISMATCH on every rank. */
    if (N >= 2) {
        const char *mine = ME == 0 ? "[[0],[1]]" : "[[1],[0]]";
        CHECK_ERRM(dt_comm_from_rank_list_str(mine, &c), DT_ERR_MISMATCH,
                   "mismatch|differ|disagree|same|match");
        mine = ME == N - 1 ? "[[0,1]]" : "[[0],[1]]"; /* different lengths too */
        CHECK_ERRM(dt_comm_from_rank_list_str(mine, &c), DT_ERR_MISMATCH,
                   "mismatch|differ|disagree|same|match");
        /* one rank passes an invalid list, the others a valid one: an error everywhere */
        mine = ME == 0 ? "[[0,0]]" : "[[0]]";
        CHECK_ERRM(dt_comm_from_rank_list_str(mine, &c), DT_ERR_MISMATCH,
                   "mismatch|differ|disagree|same|match");
        CHECK(dt_comm_pool_size() == pool, "mismatched creations changed the pool size %d -> %d",
              pool, dt_comm_pool_size());
    }
}

static void test_lists(void) {
    CHECK(dt_comm_pool_size() == 0, "pool size after dt_init is %d", dt_comm_pool_size());
    int asc[64], desc[64], len[1] = {N};
    for (int i = 0; i < N; i++) asc[i] = i, desc[i] = N - 1 - i;
    char ta[256] = "[[", td[256] = " [ [ ";
    for (int i = 0; i < N; i++) {
        char b[16];
        snprintf(b, sizeof b, "%s%d", i ? "," : "", i);
        strcat(ta, b);
        snprintf(b, sizeof b, "%s %d ", i ? "," : "", N - 1 - i);
        strcat(td, b);
    }
    strcat(ta, "]]");
    strcat(td, "] ]\n");
    dt_comm *all = make(ta, asc, len, 1);
    dt_comm *all2 = make(td, desc, len, 1); /* canonical form: the same comm */
    CHECK(all != NULL && all == all2, "'%s' and '%s' gave different communicators", ta, td);
    if (N >= 2) {
        int r01[] = {0, 1}, r10[] = {1, 0}, l11[] = {1, 1};
        dt_comm *a = make("[[0],[1]]", r01, l11, 2);
        dt_comm *b = make("[[1],[0]]", r10, l11, 2); /* group order kept: another comm */
        CHECK(a && b && a != b, "[[0],[1]] and [[1],[0]] gave the same communicator");
        int r0[] = {0}, l1[] = {1};
        make("[[0]]", r0, l1, 1); /* ranks >= 1 standalone */
        if (N == 2) {
            dt_comm *c = make("[[1,0]]", r10, len, 1);
            CHECK(c == all, "[[1,0]] and [[0,1]] gave different communicators");
        }
    } else {
        int r0[] = {0}, l1[] = {1};
        dt_comm *a = make("[[0]]", r0, l1, 1);
        CHECK(a == all, "[[0]] twice gave different communicators");
    }
    if (N == 4) {
        /* seed 003 table: [[1,2,3],[0]] */
        int r[] = {1, 2, 3, 0}, l[] = {3, 1};
        dt_comm *c = make("[[1,2,3],[0]]", r, l, 2);
        static const int want[4][8] = {
            /* rank size local_rank local_size world_rank world_size group_id group_size */
            {0, 1, 0, 1, 0, 4, 1, 2}, {0, 3, 0, 3, 1, 4, 0, 2},
            {1, 3, 1, 3, 2, 4, 0, 2}, {2, 3, 2, 3, 3, 4, 0, 2}};
        dt_comm_info in;
        CHECK_OK(dt_comm_info_get(c, &in));
        const int got[8] = {in.rank,       in.size,       in.local_rank, in.local_size,
                            in.world_rank, in.world_size, in.group_id,   in.group_size};
        CHECK(memcmp(got, want[ME], sizeof got) == 0,
              "seed 003 table row %d: got %d/%d %d/%d %d/%d %d/%d", ME, got[0], got[1], got[2],
              got[3], got[4], got[5], got[6], got[7]);
        int r2[] = {3, 2, 1, 0};
        dt_comm *c2 = make(" [[3, 2,1], [0]]", r2, l, 2);
        CHECK(c2 == c, "[[3,2,1],[0]] is not the cached [[1,2,3],[0]]");
        int r3[] = {0, 1, 2, 3}, l3[] = {1, 3};
        dt_comm *c3 = make("[[0],[1,2,3]]", r3, l3, 2); /* group order differs */
        CHECK(c3 != c, "[[0],[1,2,3]] and [[1,2,3],[0]] gave the same communicator");
        int r4[] = {0, 1, 2}, l4[] = {3};
        make("[[0,1,2]]", r4, l4, 1); /* rank 3 standalone: size 1, group_id -1 */
        int r5[] = {0, 1, 2, 3}, l5[] = {2, 2};
        make("[[0,1],[2,3]]", r5, l5, 2);
        int r6[] = {0, 2, 1, 3};
        make("[[0,2],[1,3]]", r6, l5, 2);
        int r7[] = {3, 1}, l7[] = {2};
        make("[[3,1]]", r7, l7, 1); /* ranks 0 and 2 standalone */
        int r8[] = {2, 0, 3, 1}, l8[] = {1, 1, 1, 1};
        make("[[2],[0],[3],[1]]", r8, l8, 4);
    }
    CHECK(dt_comm_pool_size() == ncreated, "pool size %d, %d distinct lists created",
          dt_comm_pool_size(), ncreated);
}

int main(int argc, char **argv) {
    const char *sz = getenv("OMPI_COMM_WORLD_SIZE"), *rk = getenv("OMPI_COMM_WORLD_RANK");
    if (!sz) sz = getenv("PMI_SIZE"), rk = getenv("PMI_RANK");
    const char *forced = getenv("DTRAIN_BACKEND");
    VOID_MODE = forced && strcmp(forced, "void") == 0 ? 1
              : forced && strcmp(forced, "mpi") == 0 ? 0 : sz == NULL;
    if (!VOID_MODE) N = atoi(sz), ME = rk ? atoi(rk) : 0;

    /* before dt_init */
    CHECK(!dt_is_initialized() && dt_comm_world() == NULL, "initialised before dt_init");
    dt_comm *c = NULL;
    CHECK_ERRM(dt_comm_from_rank_list_str("[[0]]", &c), DT_ERR_STATE, "init");
    CHECK_ERRM(dt_finalize(), DT_ERR_STATE, "init");
    CHECK_ERRM(dt_coll_sync(), DT_ERR_STATE, "init");
    if (VOID_MODE && !sz && !forced) {
        /* a backend this build lacks */
        setenv("DTRAIN_BACKEND", "nccl", 1);
        CHECK_ERRM(dt_init(), DT_ERR_UNSUPPORTED, "nccl");
        CHECK(!dt_is_initialized() && dt_comm_world() == NULL, "initialised after a failed dt_init");
        setenv("DTRAIN_BACKEND", "void", 1);
    }
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    CHECK(dt_is_initialized() && w != NULL, "not initialised after dt_init");
    if (!w) return dt_test_finish("comm");
    dt_test_rank = dt_comm_rank(w);
    CHECK(dt_test_rank == ME && dt_comm_size(w) == N, "world rank/size %d/%d, launcher says %d/%d",
          dt_test_rank, dt_comm_size(w), ME, N);
    ME = dt_test_rank < 0 ? 0 : dt_test_rank;

    /* world attributes: group 0 of 1 group, everything on this host */
    {
        model_t m;
        int ranks[64], lens[1] = {N};
        for (int i = 0; i < N; i++) ranks[i] = i;
        model_from(&m, ranks, lens, 1);
        check_comm(w, &m, "world");
    }
    CHECK_ERRM(dt_init(), DT_ERR_STATE, "init");
    CHECK(dt_comm_world() == w && dt_is_initialized(), "second dt_init disturbed the runtime");

    /* NULL communicators and outputs */
    {
        dt_comm_info info;
        CHECK_ERRM(dt_comm_info_get(NULL, &info), DT_ERR_INVALID, "NULL");
        CHECK_ERRM(dt_comm_info_get(w, NULL), DT_ERR_INVALID, "NULL");
        CHECK(dt_comm_rank(NULL) < 0 && dt_comm_size(NULL) < 0, "rank/size of NULL: %d/%d",
              dt_comm_rank(NULL), dt_comm_size(NULL));
        CHECK(strcmp(dt_comm_backend(NULL), "?") == 0, "backend(NULL) = '%s'", dt_comm_backend(NULL));
        CHECK(dt_comm_group_rank(NULL, 0) < 0 && dt_comm_world_rank_of(NULL, 0) < 0,
              "group_rank/world_rank_of accept NULL");
    }

    test_parse();
    test_mismatch();
    test_lists();
    test_errors();
    /* After the errors: creating and using comms still works on every rank. */
    {
        dt_comm *a = NULL;
        CHECK_OK(dt_comm_from_rank_list_str(N >= 2 ? "[[1,0]]" : "[[0]]", &a));
        int x = ME + 1, y = 0;
        CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, a));
        CHECK(y == (N >= 2 && ME < 2 ? 1 + 2 : ME + 1), "allreduce after errors gave %d", y);
        CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, w));
        CHECK(y == N * (N + 1) / 2, "world allreduce after errors gave %d", y);
    }

    /* dt_comm_release (issue 16, item 10: the pool never shrank) */
    {
        char list[256] = "[";
        for (int r = N - 1; r >= 0; r--) snprintf(list + strlen(list), sizeof list - strlen(list), "%s[%d]", r < N - 1 ? "," : "", r);
        strcat(list, "]"); /* [[N-1],...,[0]]: every rank alone */
        dt_comm *a = NULL, *b = NULL;
        CHECK_OK(dt_comm_from_rank_list_str(list, &a));
        int before = dt_comm_pool_size();
        CHECK_OK(dt_comm_release(a));
        CHECK(dt_comm_pool_size() == before - 1, "pool %d after dt_comm_release, want %d", dt_comm_pool_size(), before - 1);
        CHECK_ERRM(dt_comm_release(a), DT_ERR_INVALID, "not one of the pool's sub-communicators");
        CHECK_ERRM(dt_comm_release(NULL), DT_ERR_INVALID, "NULL");
        CHECK_ERRM(dt_comm_release(w), DT_ERR_INVALID, "world communicator cannot be released");
        /* made again: a new, working communicator */
        CHECK_OK(dt_comm_from_rank_list_str(list, &b));
        CHECK(dt_comm_pool_size() == before, "pool %d after making it again, want %d", dt_comm_pool_size(), before);
        int x = ME + 1, y = 0;
        if (b) CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, b));
        CHECK(y == ME + 1, "allreduce on a re-created group of one gave %d", y);
        if (N >= 2 && !VOID_MODE) {
            int r2[] = {0, 1}, l2[] = {2};
            dt_comm *p = NULL, *q = NULL;
            CHECK_OK(dt_comm_from_rank_list(r2, l2, 1, &p));
            /* rank 0 releases while the others call a collective on the world:
             * a mismatch on every rank, and p stays */
            if (ME == 0) CHECK_ERRM(dt_comm_release(p), DT_ERR_MISMATCH, "sub-communicator release");
            else CHECK_ERRM(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, w), DT_ERR_MISMATCH, "sub-communicator release");
            y = 0;
            if (ME < 2 && p) CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, p));
            if (ME < 2) CHECK(y == 3, "allreduce on [[0,1]] after the mismatched release gave %d", y);
            /* ranks that release different lists */
            CHECK_ERRM(dt_comm_release(ME == 0 ? p : b), DT_ERR_MISMATCH, "different rank_lists to dt_comm_release");
            int n0 = dt_comm_pool_size();
            CHECK_OK(dt_comm_release(p));
            CHECK_OK(dt_comm_release(b));
            CHECK(dt_comm_pool_size() == n0 - 2, "pool %d after two releases, want %d", dt_comm_pool_size(), n0 - 2);
            /* and [[0,1]] again, the same members as before */
            CHECK_OK(dt_comm_from_rank_list(r2, l2, 1, &q));
            y = 0;
            if (ME < 2 && q) CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, q));
            if (ME < 2) CHECK(y == 3, "allreduce on a re-created [[0,1]] gave %d", y);
        } else if (b) {
            CHECK_OK(dt_comm_release(b));
        }
    }

    CHECK_OK(dt_finalize());
    CHECK(!dt_is_initialized() && dt_comm_world() == NULL, "still initialised after dt_finalize");
    CHECK(dt_comm_pool_size() == 0, "pool size %d after dt_finalize", dt_comm_pool_size());
    CHECK_ERRM(dt_comm_from_rank_list_str("[[0]]", &c), DT_ERR_STATE, "init|final");
    CHECK_ERRM(dt_coll_sync(), DT_ERR_STATE, "init|final");
    CHECK_ERRM(dt_finalize(), DT_ERR_STATE, "init|final");
    if (VOID_MODE) {
        /* the void backend may start again */
        CHECK_OK(dt_init());
        CHECK(dt_is_initialized() && dt_comm_world() != NULL && dt_comm_size(dt_comm_world()) == 1,
              "void re-init failed");
        CHECK(dt_comm_pool_size() == 0, "pool size %d after re-init", dt_comm_pool_size());
        dt_comm *a = NULL;
        CHECK_OK(dt_comm_from_rank_list_str("[[0]]", &a));
        CHECK(a != NULL && dt_comm_size(a) == 1 && dt_comm_pool_size() == 1,
              "rank_list after re-init: size %d pool %d", a ? dt_comm_size(a) : -1,
              dt_comm_pool_size());
        CHECK_OK(dt_finalize());
        CHECK_ERRM(dt_finalize(), DT_ERR_STATE, "init|final");
    }
    (void)argc;
    (void)argv;
    return dt_test_finish(VOID_MODE ? (sz ? "comm_forcevoid" : "comm_standalone") : "comm_world");
}
