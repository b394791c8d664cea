/* bench/dtrain-bench/dtrain_bench.c - dtrain-bench: nccl-tests style benchmark of the
 * dtrain collectives, optionally against raw MPI on the same buffers (and, in
 * CUDA builds, --device: allreduce on device buffers, bench_device.c).
 *
 *   mpirun -np 2 dtrain-bench -o allreduce -b 1K -e 64M -f 2 --vs-mpi
 *
 * Per size one row: out-of-place and in-place time / algbw / busbw / #wrong,
 * and with --vs-mpi the matching MPI call's time and busbw and the ratio
 * dtrain busbw / MPI busbw. Timing conventions (those of nccl-tests):
 *   t      per-iteration time: every rank averages its own iterations after a
 *          barrier-synchronised start, t = max over ranks of those averages
 *   algbw  S / t (GB/s = 1e9 B/s), S = the row's size in bytes
 *   busbw  algbw * factor (allreduce 2(n-1)/n; allgather, reduce_scatter,
 *          all_to_all, gather, scatter (n-1)/n; others 1)
 * With --vs-mpi every timed block is run `rounds` times (default 3) alternating
 * dtrain / MPI, and the best (lowest) time of each is reported, so that noise
 * from other processes hits both sides alike. Details in bench/README.md. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include <mpi.h>
#include "bench.h"

#define ROTATE_BELOW ((size_t)8 << 20) /* rotate buffer sets below this size */
#define MAX_SETS 8

/* ---- options ------------------------------------------------------------- */

typedef struct opts {
    int all_ops;
    bench_op op;
    size_t minb, maxb;
    size_t factor;
    int iters, warmup, check, rounds;
    dt_dtype dtype;
    dt_op redop;
    const char *json;
    int vs_mpi;
    int vs_single;    /* --vs-single: reference = one dt_allreduce (list mode) */
    int root;
    bench_mode mode;
    int ntensors;
    int async;
    int shared_mem;   /* --shared-mem: buffers from dt_comm_alloc_shared */
    int wire;         /* --wire: dt_wire of allreduce / reduce_scatter */
    int device;       /* --device: CUDA device buffers (bench_device.c) */
    int vs_nccl;      /* --vs-nccl: with --device, raw ncclAllReduce as reference */
    uint64_t seed;
} opts;

static void usage(FILE *f) {
    fprintf(f,
        "usage: dtrain-bench [options]   (run under mpirun for more than one rank)\n"
        "  -o, --op OP           collective: allreduce allgather reduce_scatter reduce\n"
        "                        broadcast gather scatter all_to_all sendrecv barrier, or all\n"
        "                        (default allreduce)\n"
        "  -b, --minbytes SIZE   smallest size in bytes, suffix K/M/G = 2^10/2^20/2^30 (default 32M)\n"
        "  -e, --maxbytes SIZE   largest size (default 32M)\n"
        "  -f, --stepfactor F    multiply the size by F (integer >= 2) between rows (default 2)\n"
        "  -n, --iters N         timed iterations per timing block (default 20)\n"
        "  -w, --warmup N        warm-up iterations (default 5)\n"
        "  -c, --check N         checked iterations per row and placement, 0 = no check (default 1)\n"
        "  -d, --dtype T         f32 f64 f16 bf16 i8 u8 i32 i64 (default f32)\n"
        "  -r, --redop OP        sum prod min max avg (default sum)\n"
        "  -R, --root RANK       root world rank of reduce/broadcast/gather/scatter (default 0)\n"
        "      --vs-mpi          also time the matching raw MPI call on the same buffers\n"
        "      --rounds N        alternating dtrain/MPI timing rounds, best kept\n"
        "                        (default 3 with --vs-mpi, else 1)\n"
        "      --vs-single       with --list: also time ONE dt_allreduce of the same total\n"
        "                        size (alternated rounds) and print list / single time\n"
        "      --list N          allreduce only: the size split into N separately allocated\n"
        "                        tensors, reduced by ONE dt_allreduce_list call\n"
        "      --separate N      allreduce only: N dt_allreduce calls per iteration on\n"
        "                        the same N tensors\n"
        "      --async           time the *_async forms (submit + wait)\n"
        "      --wire bf16|f16   allreduce / reduce_scatter (single buffer): that type on the\n"
        "                        wire, f32 sums (dt_allreduce_ex; f32, f16, bf16 data). The\n"
        "                        data are then exact in the wire type, so results are checked\n"
        "                        bit for bit; the MPI reference stays the plain MPI call\n"
        "      --shared-mem      single-buffer modes: buffers from dt_comm_alloc_shared\n"
        "                        (in-place allreduces then reduce between the ranks'\n"
        "                        buffers directly, on one host)\n"
        "      --device          allreduce f32 sum on CUDA device buffers (CUDA builds): dtrain's\n"
        "                        stream-ordered and blocking forms; with --vs-nccl raw\n"
        "                        ncclAllReduce on the same buffers (ranks on GPUs of their own),\n"
        "                        with --vs-mpi MPI_Allreduce on pinned host buffers\n"
        "      --vs-nccl         see --device\n"
        "      --json FILE       append one JSON object per row and placement to FILE\n"
        "      --seed S          data seed (default 1)\n"
        "  -h, --help            this text\n"
        "Every rank must be started with the same options (checked at start; --json is rank 0's).\n"
        "Exit status: 0 ok, 1 wrong results, a failing call or sizes that do not fit in memory,\n"
        "2 bad command line (also: options that differ between ranks).\n");
}

/* SIZE: decimal integer with optional K/M/G (powers of 1024), optional B. */
static int parse_size(const char *s, size_t *out) {
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno) return -1;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k') { mul = 1ULL << 10; end++; }
    else if (*end == 'M' || *end == 'm') { mul = 1ULL << 20; end++; }
    else if (*end == 'G' || *end == 'g') { mul = 1ULL << 30; end++; }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    if (v > (unsigned long long)SIZE_MAX / mul) return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int parse_int(const char *s, long lo, long hi, int *out) {
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static char g_bad[512]; /* this rank's command-line error */

static int bad(int rank, const char *fmt, const char *a, const char *b) {
    snprintf(g_bad, sizeof g_bad, fmt, a, b);
    if (rank == 0) { /* the others say it only if rank 0's command line was fine (agree_command_line) */
        fprintf(stderr, "dtrain-bench: %s\n", g_bad);
        usage(stderr);
    }
    return 2;
}

/* Returns 0, 1 for -h (usage printed), or 2 for a bad command line. */
static int parse_args(int argc, char **argv, opts *o, int rank) {
    memset(o, 0, sizeof *o);
    o->op = B_ALLREDUCE;
    o->minb = o->maxb = (size_t)32 << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->check = 1;
    o->rounds = -1;
    o->dtype = DT_F32;
    o->redop = DT_SUM;
    o->mode = M_SINGLE;
    o->seed = 1;
    int have_list = 0, have_sep = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char name[32];
        /* --name=value */
        const char *eq = (a[0] == '-' && a[1] == '-') ? strchr(a, '=') : NULL;
        if (eq) {
            size_t l = (size_t)(eq - a);
            if (l >= sizeof name) return bad(rank, "unknown option '%s'%s", a, "");
            memcpy(name, a, l);
            name[l] = 0;
            val = eq + 1;
            a = name;
        }
#define IS(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
#define NEEDVAL() do { \
            if (!val) { \
                if (i + 1 >= argc) return bad(rank, "option '%s' needs a value%s", a, ""); \
                val = argv[++i]; \
            } \
        } while (0)
#define NOVAL() do { if (val) return bad(rank, "option '%s' takes no value%s", a, ""); } while (0)
        if (IS("-h", "--help")) {
            NOVAL();
            if (rank == 0) usage(stdout);
            return 1;
        } else if (IS("-o", "--op")) {
            NEEDVAL();
            if (strcmp(val, "all") == 0) o->all_ops = 1;
            else if (bench_op_parse(val, &o->op) != 0)
                return bad(rank, "unknown collective '%s'%s", val, "");
        } else if (IS("-b", "--minbytes")) {
            NEEDVAL();
            if (parse_size(val, &o->minb)) return bad(rank, "bad size '%s' for %s", val, a);
        } else if (IS("-e", "--maxbytes")) {
            NEEDVAL();
            if (parse_size(val, &o->maxb)) return bad(rank, "bad size '%s' for %s", val, a);
        } else if (IS("-f", "--stepfactor")) {
            int f;
            NEEDVAL();
            if (parse_int(val, 2, 1 << 20, &f)) return bad(rank, "bad step factor '%s' (integer >= 2)%s", val, "");
            o->factor = (size_t)f;
        } else if (IS("-n", "--iters")) {
            NEEDVAL();
            if (parse_int(val, 1, INT_MAX, &o->iters)) return bad(rank, "bad iteration count '%s' (>= 1)%s", val, "");
        } else if (IS("-w", "--warmup")) {
            NEEDVAL();
            if (parse_int(val, 0, INT_MAX, &o->warmup)) return bad(rank, "bad warm-up count '%s' (>= 0)%s", val, "");
        } else if (IS("-c", "--check")) {
            NEEDVAL();
            if (parse_int(val, 0, INT_MAX, &o->check)) return bad(rank, "bad check count '%s' (>= 0)%s", val, "");
        } else if (IS("-d", "--dtype")) {
            NEEDVAL();
            if (dt_dtype_parse(val, &o->dtype) != DT_OK) return bad(rank, "unknown dtype '%s'%s", val, "");
        } else if (IS("-r", "--redop")) {
            NEEDVAL();
            if (dt_op_parse(val, &o->redop) != DT_OK) return bad(rank, "unknown reduction op '%s'%s", val, "");
        } else if (IS("-R", "--root")) {
            NEEDVAL();
            if (parse_int(val, 0, INT_MAX, &o->root)) return bad(rank, "bad root '%s'%s", val, "");
        } else if (IS("--json", "--json")) {
            NEEDVAL();
            if (!*val) return bad(rank, "empty file name for %s%s", a, "");
            o->json = val;
        } else if (IS("--vs-mpi", "--vs-mpi")) {
            NOVAL();
            o->vs_mpi = 1;
        } else if (IS("--vs-single", "--vs-single")) {
            NOVAL();
            o->vs_single = 1;
        } else if (IS("--rounds", "--rounds")) {
            NEEDVAL();
            if (parse_int(val, 1, 1000, &o->rounds)) return bad(rank, "bad round count '%s' (1..1000)%s", val, "");
        } else if (IS("--list", "--list")) {
            NEEDVAL();
            if (parse_int(val, 1, 1 << 24, &o->ntensors)) return bad(rank, "bad tensor count '%s' for %s", val, a);
            have_list = 1;
            o->mode = M_LIST;
        } else if (IS("--separate", "--separate")) {
            NEEDVAL();
            if (parse_int(val, 1, 1 << 24, &o->ntensors)) return bad(rank, "bad tensor count '%s' for %s", val, a);
            have_sep = 1;
            o->mode = M_SEPARATE;
        } else if (IS("--async", "--async")) {
            NOVAL();
            o->async = 1;
        } else if (IS("--shared-mem", "--shared-mem")) {
            NOVAL();
            o->shared_mem = 1;
        } else if (IS("--wire", "--wire")) {
            NEEDVAL();
            if (strcmp(val, "bf16") == 0) o->wire = DT_WIRE_BF16;
            else if (strcmp(val, "f16") == 0) o->wire = DT_WIRE_F16;
            else if (strcmp(val, "native") == 0) o->wire = DT_WIRE_NATIVE;
            else return bad(rank, "unknown wire type '%s' (bf16, f16 or native)%s", val, "");
        } else if (IS("--device", "--device")) {
            NOVAL();
            o->device = 1;
        } else if (IS("--vs-nccl", "--vs-nccl")) {
            NOVAL();
            o->vs_nccl = 1;
        } else if (IS("--seed", "--seed")) {
            size_t s;
            NEEDVAL();
            if (parse_size(val, &s)) return bad(rank, "bad seed '%s'%s", val, "");
            o->seed = s;
        } else {
            return bad(rank, "unknown option '%s'%s", argv[i], "");
        }
#undef IS
#undef NEEDVAL
#undef NOVAL
    }
    if (o->minb > o->maxb) return bad(rank, "minbytes exceeds maxbytes%s%s", "", "");
    if (have_list && have_sep) return bad(rank, "--list and --separate are exclusive%s%s", "", "");
    if ((have_list || have_sep) && (o->all_ops || o->op != B_ALLREDUCE))
        return bad(rank, "--list / --separate apply to allreduce only%s%s", "", "");
    if (o->vs_single && !have_list) return bad(rank, "--vs-single needs --list%s%s", "", "");
    if (o->shared_mem && (have_list || have_sep)) return bad(rank, "--shared-mem applies to single-buffer runs, not --list / --separate%s%s", "", "");
    if (o->vs_single && o->vs_mpi) return bad(rank, "--vs-single and --vs-mpi are exclusive%s%s", "", "");
    if (o->wire && (o->all_ops || (o->op != B_ALLREDUCE && o->op != B_REDUCE_SCATTER) || have_list || have_sep))
        return bad(rank, "--wire applies to single-buffer allreduce and reduce_scatter%s%s", "", "");
    if (o->wire && o->dtype != DT_F32 && o->dtype != DT_F16 && o->dtype != DT_BF16)
        return bad(rank, "--wire needs f32, f16 or bf16 data, not %s%s", dt_dtype_name(o->dtype), "");
#ifndef DTRAIN_HAVE_CUDA
    if (o->device || o->vs_nccl) return bad(rank, "--device / --vs-nccl: this build of dtrain-bench has no CUDA%s%s", "", "");
#endif
    if (o->vs_nccl && !o->device) return bad(rank, "--vs-nccl needs --device%s%s", "", "");
    if (o->device && (o->all_ops || o->op != B_ALLREDUCE || o->dtype != DT_F32 || o->redop != DT_SUM ||
                      have_list || have_sep || o->async || o->shared_mem || o->json || o->vs_single || o->wire))
        return bad(rank, "--device measures allreduce f32 sum only, without --list, --separate, --async, --shared-mem, "
                   "--json, --vs-single, --wire%s%s", "", "");
    if (o->vs_single) o->vs_mpi = 1; /* the same alternated reference timing, another reference */
    if (o->rounds < 0) o->rounds = o->vs_mpi ? 3 : 1;
    return 0;
}

/* ---- helpers --------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static dt_comm *g_world;
static int g_rank, g_size;

static void die(const char *what, int rc) {
    fprintf(stderr, "dtrain-bench: rank %d: %s failed: %s (%s)\n", g_rank, what,
            dt_status_str(rc), dt_last_error());
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static double max_over_ranks(double v) {
    double out = v;
    int rc = dt_allreduce(&v, &out, 1, DT_F64, DT_MAX, g_world);
    if (rc != DT_OK) die("dt_allreduce(max time)", rc);
    return out;
}

static int64_t sum_over_ranks(int64_t v) {
    int64_t out = v;
    int rc = dt_allreduce(&v, &out, 1, DT_I64, DT_SUM, g_world);
    if (rc != DT_OK) die("dt_allreduce(sum)", rc);
    return out;
}

static void barrier(void) {
    int rc = dt_barrier(g_world);
    if (rc != DT_OK) die("dt_barrier", rc);
}

static void run_dtrain(const bench_case *c, bench_set *s, int inplace) {
    const char *what = "";
    int rc = bench_call_dtrain(c, s, inplace, &what);
    if (rc != DT_OK) die(what, rc);
}

static void run_mpi(const bench_case *c, bench_set *s, int inplace) {
    int rc = bench_call_mpi(c, s, inplace);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "dtrain-bench: rank %d: MPI reference for %s failed: %s\n", g_rank,
                bench_op_get(c->op)->name, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* One timed block: barrier, iters calls rotating over the sets, each rank's
 * average; returns the max over ranks, in seconds per iteration. */
static double time_block(const bench_case *c, bench_set *sets, int nsets, int inplace,
                         int mpi, int iters) {
    barrier();
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        if (mpi) run_mpi(c, &sets[i % nsets], inplace);
        else run_dtrain(c, &sets[i % nsets], inplace);
    }
    double t = (now_s() - t0) / iters;
    return max_over_ranks(t);
}

/* ---- output ---------------------------------------------------------------- */

typedef struct row_result {
    int measured;          /* placement exists for this op */
    double t;              /* seconds per iteration */
    double algbw, busbw;   /* GB/s */
    int64_t wrong;         /* over all ranks; -1 = not checked */
    int have_mpi;
    double mpi_t, mpi_busbw, ratio;
} row_result;

typedef struct summary {
    double busbw_sum;
    int busbw_n;
    double ratio_min, ratio_sum;
    int ratio_n;
    int64_t wrong;
} summary;

static void fmt_col(char *buf, size_t n, const row_result *r) {
    if (!r->measured) {
        snprintf(buf, n, "%9s %8s %8s %6s", "-", "-", "-", "-");
        return;
    }
    char w[32];
    if (r->wrong < 0) snprintf(w, sizeof w, "N/A");
    else snprintf(w, sizeof w, "%lld", (long long)r->wrong);
    snprintf(buf, n, "%9.2f %8.2f %8.2f %6s", r->t * 1e6, r->algbw, r->busbw, w);
}

/* The JSON rows are encoded by jansson; every real with 6 significant digits
 * ("%.6g"), NaN/inf and values not measured as null. */
static void json_set(json_t *row, const char *key, json_t *v) {
    if (json_object_set_new(row, key, v) != 0) json_object_set_new(row, "error", json_string("out of memory"));
}

static void json_num(json_t *row, const char *key, double v, int have) {
    json_set(row, key, have && isfinite(v) ? json_real(v) : json_null());
}

static void json_row(FILE *f, const opts *o, const bench_case *c, const char *placement,
                     const row_result *r) {
    const bench_op_info *oi = bench_op_get(c->op);
    json_t *row = json_object();
    json_set(row, "op", json_string(oi->name));
    json_set(row, "bytes", json_integer((json_int_t)c->bytes));
    json_set(row, "count", json_integer((json_int_t)c->total_elems));
    json_set(row, "dtype", json_string(dt_dtype_name(c->dtype)));
    json_set(row, "redop", oi->reduces ? json_string(dt_op_name((dt_op)c->redop)) : json_null());
    json_set(row, "root", json_integer(c->root));
    json_set(row, "placement", json_string(placement));
    json_set(row, "ranks", json_integer(c->nranks));
    json_set(row, "mode", json_string(c->mode == M_LIST ? "list" : c->mode == M_SEPARATE ? "separate" : "single"));
    json_set(row, "ntensors", json_integer(c->mode == M_SINGLE ? 1 : c->ntensors));
    json_set(row, "async", json_boolean(c->async));
    json_set(row, "shared_mem", json_boolean(c->shared_mem));
    json_set(row, "wire", json_string(c->wire == DT_WIRE_BF16 ? "bf16" : c->wire == DT_WIRE_F16 ? "f16" : "native"));
    json_num(row, "time_us", r->t * 1e6, 1);
    json_num(row, "algbw_GBps", r->algbw, 1);
    json_num(row, "busbw_GBps", r->busbw, 1);
    json_set(row, "wrong", r->wrong < 0 ? json_null() : json_integer((json_int_t)r->wrong));
    if (o->vs_single) {
        json_num(row, "single_time_us", r->mpi_t * 1e6, r->have_mpi);
        json_num(row, "list_over_single", r->ratio > 0 ? 1.0 / r->ratio : 0, r->have_mpi);
    } else if (o->vs_mpi) {
        json_num(row, "mpi_time_us", r->mpi_t * 1e6, r->have_mpi);
        json_num(row, "mpi_busbw_GBps", r->mpi_busbw, r->have_mpi);
        json_num(row, "ratio", r->ratio, r->have_mpi);
    }
    if (!row || json_dumpf(row, f, JSON_COMPACT | JSON_REAL_PRECISION(6)) != 0 || fputc('\n', f) == EOF)
        fprintf(stderr, "dtrain-bench: writing a JSON row failed\n");
    json_decref(row);
}

static void print_header(const opts *o, bench_op op, const char *backend, int hosts) {
    const bench_op_info *oi = bench_op_get(op);
    const char *mode = o->mode == M_LIST ? "list" : o->mode == M_SEPARATE ? "separate" : "single";
    char root[16];
    if (oi->rooted) snprintf(root, sizeof root, "%d", o->root);
    else snprintf(root, sizeof root, "none");
    printf("# dtrain-bench: op %s, dtype %s, redop %s, root %s\n", oi->name,
           dt_dtype_name(o->dtype), oi->reduces ? dt_op_name(o->redop) : "none", root);
    printf("# ranks %d, hosts %d, backend %s, mode %s", g_size, hosts, backend, mode);
    if (o->mode != M_SINGLE) printf(" (%d tensors)", o->ntensors);
    printf(", %s calls%s\n", o->async ? "async (submit + wait)" : "blocking",
           o->wire == DT_WIRE_BF16 ? ", bf16 on the wire" : o->wire == DT_WIRE_F16 ? ", f16 on the wire" : "");
    printf("# iters %d, warmup %d, check %d, rounds %d%s, sizes %zu..%zu x%zu\n", o->iters,
           o->warmup, o->check, o->rounds,
           o->vs_single ? " (list / one dt_allreduce alternated, best kept)"
           : o->vs_mpi ? " (dtrain/MPI alternated, best kept)" : "",
           o->minb, o->maxb, o->factor);
    printf("#\n");
    printf("# %41s %-34s %-34s %s\n", "", "  ------------ out-of-place ------",
           "  -------------- in-place --------",
           o->vs_single ? "  one dt_allreduce of the same size: out / in --"
           : o->vs_mpi ? (o->shared_mem ? "  raw MPI (in-place) ------" : "  raw MPI (out-of-place) --") : "");
    printf("# %10s %12s %5s %6s %5s %9s %8s %8s %6s %9s %8s %8s %6s", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    if (o->vs_single) printf(" %9s %8s %9s %8s", "time", "list/1", "time", "list/1");
    else if (o->vs_mpi) printf(" %9s %8s %6s", "time", "busbw", "ratio");
    printf("\n");
    printf("# %10s %12s %5s %6s %5s %9s %8s %8s %6s %9s %8s %8s %6s", "(B)", "(elements)", "",
           "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    if (o->vs_single) printf(" %9s %8s %9s %8s", "(us)", "", "(us)", "");
    else if (o->vs_mpi) printf(" %9s %8s %6s", "(us)", "(GB/s)", "");
    printf("\n");
    fflush(stdout);
}

/* ---- one row ------------------------------------------------------------------ */

static void report_mismatch(const bench_case *c, const char *placement, size_t wrong) {
    const bench_mismatch *m = &bench_first_bad;
    fprintf(stderr,
            "dtrain-bench: rank %d: %s %s size %zu count %zu %s: %zu wrong element(s)",
            c->rank, bench_op_get(c->op)->name, dt_dtype_name(c->dtype), c->bytes,
            c->total_elems, placement, wrong);
    if (m->have)
        fprintf(stderr, "; first in %s at element %llu: expected %.17g (0x%llx) got %.17g (0x%llx)",
                m->what, (unsigned long long)m->index, m->want, (unsigned long long)m->want_bits,
                m->got, (unsigned long long)m->got_bits);
    fprintf(stderr, "\n");
}

/* Returns -1 if buffers could not be allocated on some rank. */
static int run_row(const opts *o, bench_case *c, const bench_gen *g, row_result res[2]) {
    memset(res, 0, 2 * sizeof *res);
    size_t sb = bench_set_bytes(c);
    int nsets = 1;
    if (sb < ROTATE_BELOW) {
        size_t k = sb ? (ROTATE_BELOW + sb - 1) / sb : MAX_SETS;
        nsets = k > MAX_SETS ? MAX_SETS : (int)k;
    }
    bench_set sets[MAX_SETS];
    int got = 0;
    for (; got < nsets; got++)
        if (bench_set_alloc(c, &sets[got]) != 0) break;
    int64_t fails = sum_over_ranks(got < nsets);
    if (fails) {
        for (int i = 0; i < got; i++) bench_set_free(c, &sets[i]);
        return -1;
    }
    /* timing iterations read set contents: start from valid inputs */
    for (int i = 0; i < nsets; i++) bench_init(c, g, &sets[i], 0);
    const bench_op_info *oi = bench_op_get(c->op);
    double S = (double)c->bytes, bf = bench_bus_factor(c->op, c->nranks);
    for (int p = 0; p < 2; p++) {
        row_result *r = &res[p];
        int inplace = p;
        if (inplace && !oi->inplace) continue;
        r->measured = 1;
        /* correctness: re-initialise before every checked call */
        if (o->check > 0 && c->op != B_BARRIER) {
            size_t wrong = 0;
            bench_mismatch_reset();
            for (int k = 0; k < o->check; k++) {
                bench_init(c, g, &sets[0], inplace);
                barrier();
                run_dtrain(c, &sets[0], inplace);
                wrong += bench_verify(c, g, &sets[0], inplace);
            }
            if (wrong) report_mismatch(c, inplace ? "in-place" : "out-of-place", wrong);
            r->wrong = sum_over_ranks((int64_t)wrong);
            for (int i = 0; i < nsets; i++) bench_init(c, g, &sets[i], inplace);
        } else {
            r->wrong = c->op == B_BARRIER && o->check > 0 ? 0 : -1;
        }
        /* MPI reference: out-of-place, or in-place with --shared-mem (the
         * placement that memory is for); both placements with --vs-single */
        int mpi = o->vs_mpi && (c->ref_single || inplace == c->shared_mem) && bench_mpi_available(c, inplace);
        /* warm-up */
        for (int i = 0; i < o->warmup; i++) run_dtrain(c, &sets[i % nsets], inplace);
        if (mpi)
            for (int i = 0; i < o->warmup; i++) run_mpi(c, &sets[i % nsets], inplace);
        /* timed rounds, alternating dtrain / MPI; best of each kept */
        double best = INFINITY, best_mpi = INFINITY;
        for (int k = 0; k < o->rounds; k++) {
            double t = time_block(c, sets, nsets, inplace, 0, o->iters);
            if (t < best) best = t;
            if (mpi) {
                double tm = time_block(c, sets, nsets, inplace, 1, o->iters);
                if (tm < best_mpi) best_mpi = tm;
            }
        }
        r->t = best;
        r->algbw = best > 0 ? S / best / 1e9 : 0;
        r->busbw = r->algbw * bf;
        if (mpi) {
            r->have_mpi = 1;
            r->mpi_t = best_mpi;
            r->mpi_busbw = best_mpi > 0 ? S / best_mpi / 1e9 * bf : 0;
            /* = busbw / mpi_busbw whenever those are non-zero; defined also
             * for barrier and single-rank rows, where busbw is 0 */
            r->ratio = best > 0 ? best_mpi / best : 0;
        }
    }
    for (int i = 0; i < nsets; i++) bench_set_free(c, &sets[i]);
    return 0;
}

/* ---- one op -------------------------------------------------------------------- */

static int run_op(const opts *o, bench_op op, FILE *jf, const char *backend, int hosts,
                  summary *sum) {
    const bench_op_info *oi = bench_op_get(op);
    if (g_rank == 0) print_header(o, op, backend, hosts);
    if (op == B_SENDRECV && g_size < 2) {
        if (g_rank == 0) printf("# sendrecv needs at least 2 ranks: skipped\n#\n");
        return 0;
    }
    bench_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.dtype = o->dtype;
    c.redop = oi->reduces ? (int)o->redop : -1;
    c.root = oi->rooted ? o->root : -1;
    c.rank = g_rank;
    c.nranks = g_size;
    c.mode = o->mode;
    c.ntensors = o->mode == M_SINGLE ? 1 : o->ntensors;
    c.async = o->async;
    c.shared_mem = o->shared_mem;
    c.need_slab = o->mode == M_LIST && o->vs_mpi;
    c.ref_single = o->vs_single;
    c.wire = o->wire;
    c.comm = g_world;
    bench_gen g;
    /* with a 16-bit wire the values keep within what it carries exactly */
    dt_dtype lim = o->wire == DT_WIRE_BF16 && o->dtype == DT_F32 ? DT_BF16
                 : o->wire == DT_WIRE_F16 && o->dtype == DT_F32 ? DT_F16 : o->dtype;
    bench_gen_init(&g, lim, oi->reduces ? (int)o->redop : -1, g_size, o->seed);
    g.dtype = o->dtype;

    size_t prev = SIZE_MAX;
    for (size_t b = o->minb;;) {
        bench_case row = c;
        bench_case_layout(&row, b);
        int skip = op == B_BARRIER ? (prev != SIZE_MAX) : (row.bytes == prev);
        if (!skip) {
            prev = row.bytes;
            row_result res[2];
            if (run_row(o, &row, &g, res) != 0) {
                if (g_rank == 0) {
                    printf("# size %zu: out of memory on some rank, stopping\n", b);
                    fflush(stdout);
                    fprintf(stderr, "dtrain-bench: %s size %zu bytes: the buffers could not be allocated on some rank "
                            "(out of memory); choose smaller sizes (-b / -e)\n", oi->name, b);
                }
                return 1;
            }
            for (int p = 0; p < 2; p++) {
                if (!res[p].measured) continue;
                if (res[p].wrong > 0) sum->wrong += res[p].wrong;
                if (op != B_BARRIER) { /* no bytes: kept out of the bandwidth average */
                    sum->busbw_sum += res[p].busbw;
                    sum->busbw_n++;
                }
                if (res[p].have_mpi) {
                    if (sum->ratio_n == 0 || res[p].ratio < sum->ratio_min)
                        sum->ratio_min = res[p].ratio;
                    sum->ratio_sum += res[p].ratio;
                    sum->ratio_n++;
                }
            }
            if (g_rank == 0) {
                char c0[64], c1[64];
                fmt_col(c0, sizeof c0, &res[0]);
                fmt_col(c1, sizeof c1, &res[1]);
                printf("  %10zu %12zu %5s %6s %5d %s %s", row.bytes, row.total_elems,
                       dt_dtype_name(row.dtype),
                       oi->reduces ? dt_op_name((dt_op)row.redop) : "none", row.root, c0, c1);
                if (o->vs_single) {
                    for (int p = 0; p < 2; p++)
                        if (res[p].have_mpi) printf(" %9.2f %8.3f", res[p].mpi_t * 1e6, res[p].t / res[p].mpi_t);
                        else printf(" %9s %8s", "-", "-");
                } else if (o->vs_mpi) {
                    const row_result *m = &res[o->shared_mem ? 1 : 0];
                    if (m->have_mpi)
                        printf(" %9.2f %8.2f %6.3f", m->mpi_t * 1e6, m->mpi_busbw, m->ratio);
                    else
                        printf(" %9s %8s %6s", "-", "-", "-");
                }
                printf("\n");
                fflush(stdout);
                if (jf) {
                    json_row(jf, o, &row, "out", &res[0]);
                    if (res[1].measured) json_row(jf, o, &row, "in", &res[1]);
                    fflush(jf);
                }
            }
        }
        if (b >= o->maxb || op == B_BARRIER) break;
        size_t nb = b * o->factor;
        if (b == 0) nb = 1;
        if (nb / o->factor != b || nb > o->maxb) break; /* overflow or past the end */
        b = nb;
    }
    return 0;
}

/* ---- the same command line on every rank ---------------------------------------- */

static unsigned long long fnv(const char *s) {
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h;
}

/* Every rank must run the same benchmark: a rank with another option (say
 * --vs-mpi on one rank) would wait in a collective the others never call. The
 * parse results are agreed first (a command line refused on one rank refuses
 * it everywhere), then every option but --json (rank 0's). Returns the exit
 * code to use (0: go on). Collective. */
static int agree_command_line(int prc, const opts *o) {
    if (g_size == 1) return prc;
    int v[2] = {prc, -prc};
    int rc = dt_allreduce(v, v, 2, DT_I32, DT_MAX, g_world);
    if (rc != DT_OK) die("dt_allreduce(command line)", rc);
    if (v[0] != -v[1]) { /* refused or -h on some ranks only */
        if (prc == 2 && g_rank != 0)
            fprintf(stderr, "dtrain-bench[rank %d]: %s (start every rank with the same command line)\n", g_rank, g_bad);
        else if (prc == 0)
            fprintf(stderr, "dtrain-bench[rank %d]: the command line of another rank was refused or asked for --help: "
                    "start every rank with the same command line\n", g_rank);
        return 2;
    }
    if (prc != 0) return prc;
    char val[24][48];
    static const char *const names[24] = {"-o", "-b", "-e", "-f", "-n", "-w", "-c", "-d", "-r", "-R", "--vs-mpi",
                                          "--vs-single", "--rounds", "--list/--separate", "--async", "--shared-mem",
                                          "--seed", "--wire", "--device/--vs-nccl"};
    int n = 0;
    snprintf(val[n++], 48, "%s", o->all_ops ? "all" : bench_op_get(o->op)->name);
    snprintf(val[n++], 48, "%zu", o->minb);
    snprintf(val[n++], 48, "%zu", o->maxb);
    snprintf(val[n++], 48, "%zu", o->factor);
    snprintf(val[n++], 48, "%d", o->iters);
    snprintf(val[n++], 48, "%d", o->warmup);
    snprintf(val[n++], 48, "%d", o->check);
    snprintf(val[n++], 48, "%s", dt_dtype_name(o->dtype));
    snprintf(val[n++], 48, "%s", dt_op_name(o->redop));
    snprintf(val[n++], 48, "%d", o->root);
    snprintf(val[n++], 48, "%s", o->vs_mpi && !o->vs_single ? "on" : "off");
    snprintf(val[n++], 48, "%s", o->vs_single ? "on" : "off");
    snprintf(val[n++], 48, "%d", o->rounds);
    snprintf(val[n++], 48, "%s %d", o->mode == M_LIST ? "list" : o->mode == M_SEPARATE ? "separate" : "none",
             o->ntensors);
    snprintf(val[n++], 48, "%s", o->async ? "on" : "off");
    snprintf(val[n++], 48, "%s", o->shared_mem ? "on" : "off");
    snprintf(val[n++], 48, "%llu", (unsigned long long)o->seed);
    snprintf(val[n++], 48, "%d", o->wire);
    snprintf(val[n++], 48, "%d %d", o->device, o->vs_nccl);
    long long h[2 * 24];
    for (int i = 0; i < n; i++) {
        h[i] = (long long)(fnv(val[i]) >> 1);
        h[n + i] = -h[i];
    }
    rc = dt_allreduce(h, h, 2 * (size_t)n, DT_I64, DT_MAX, g_world);
    if (rc != DT_OK) die("dt_allreduce(options)", rc);
    char msg[1024] = "";
    size_t k = 0;
    for (int i = 0; i < n; i++)
        if (h[i] != -h[n + i] && k < sizeof msg)
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s %s", k ? ", " : "", names[i], val[i]);
    if (!k) return 0;
    fprintf(stderr, "dtrain-bench[rank %d]: options differ between ranks (this rank has %s): start every rank with "
            "the same command line\n", g_rank, msg);
    return 2;
}

int main(int argc, char **argv) {
#ifdef DTRAIN_HAVE_CUDA
    for (int i = 1; i < argc; i++) /* the device before dt_init: NCCL takes the current one */
        if (strcmp(argv[i], "--device") == 0) bench_device_select();
#endif
    int rc = dt_init();
    if (rc != DT_OK) {
        fprintf(stderr, "dtrain-bench: dt_init failed: %s (%s)\n", dt_status_str(rc),
                dt_last_error());
        /* a malformed DTRAIN_* setting is a usage error, like a bad option */
        return rc == DT_ERR_INVALID || rc == DT_ERR_UNSUPPORTED ? 2 : 1;
    }
    g_world = dt_comm_world();
    g_rank = dt_comm_rank(g_world);
    g_size = dt_comm_size(g_world);
    opts o;
    int prc = parse_args(argc, argv, &o, g_rank);
    if (prc == 0 && o.root >= g_size) {
        char rs[16], ns[16];
        snprintf(rs, sizeof rs, "%d", o.root);
        snprintf(ns, sizeof ns, "%d", g_size);
        prc = bad(g_rank, "root %s is not a world rank (%s ranks)", rs, ns);
    }
    prc = agree_command_line(prc, &o);
    if (prc != 0) {
        dt_finalize();
        return prc == 1 ? 0 : 2;
    }

#ifdef DTRAIN_HAVE_CUDA
    if (o.device) {
        rc = bench_device_main(o.minb, o.maxb, o.factor, o.iters, o.warmup, o.rounds, o.vs_nccl, o.vs_mpi, g_world);
        dt_finalize();
        return rc;
    }
#endif
    dt_comm_info info;
    dt_comm_info_get(g_world, &info);
    int hosts = (int)sum_over_ranks(info.local_rank == 0);
    const char *backend = dt_comm_backend(g_world);

    FILE *jf = NULL;
    int jfail = 0;
    if (o.json && g_rank == 0) {
        jf = fopen(o.json, "a");
        if (!jf) {
            fprintf(stderr, "dtrain-bench: cannot open %s: %s\n", o.json, strerror(errno));
            jfail = 1;
        }
    }
    if (sum_over_ranks(jfail)) {
        dt_finalize();
        return 1;
    }

    summary sum;
    memset(&sum, 0, sizeof sum);
    int failed = 0;
    for (int op = 0; op < B_NUM_OPS && !failed; op++) {
        if (!o.all_ops && op != (int)o.op) continue;
        summary s1;
        memset(&s1, 0, sizeof s1);
        failed = run_op(&o, (bench_op)op, jf, backend, hosts, &s1);
        if (g_rank == 0 && o.all_ops && s1.busbw_n) {
            printf("# %s: avg bus bandwidth %.3f GB/s", bench_op_get((bench_op)op)->name,
                   s1.busbw_sum / s1.busbw_n);
            if (s1.ratio_n && !o.vs_single)
                printf(", ratio vs MPI min %.3f avg %.3f", s1.ratio_min, s1.ratio_sum / s1.ratio_n);
            printf(", #wrong %lld\n#\n", (long long)s1.wrong);
        }
        if (s1.ratio_n) {
            if (sum.ratio_n == 0 || s1.ratio_min < sum.ratio_min) sum.ratio_min = s1.ratio_min;
            sum.ratio_sum += s1.ratio_sum;
            sum.ratio_n += s1.ratio_n;
        }
        sum.busbw_sum += s1.busbw_sum;
        sum.busbw_n += s1.busbw_n;
        sum.wrong += s1.wrong;
    }
    if (g_rank == 0) {
        printf("# Out of bounds values : %lld %s\n", (long long)sum.wrong,
               sum.wrong ? "ERROR" : "OK");
        printf("# Avg bus bandwidth    : %.3f GB/s\n",
               sum.busbw_n ? sum.busbw_sum / sum.busbw_n : 0.0);
        if (o.vs_single) {
            if (sum.ratio_n)
                printf("# List / single time   : max %.3f over %d columns\n", 1.0 / sum.ratio_min, sum.ratio_n);
        } else if (o.vs_mpi) {
            if (sum.ratio_n)
                printf("# Ratio vs MPI (busbw) : min %.3f avg %.3f over %d rows\n", sum.ratio_min,
                       sum.ratio_sum / sum.ratio_n, sum.ratio_n);
            else
                printf("# Ratio vs MPI (busbw) : - (no MPI reference for these rows)\n");
        }
        printf("#\n");
        fflush(stdout);
    }
    int jerr = 0;
    if (jf && (ferror(jf) || fclose(jf) != 0)) {
        fprintf(stderr, "dtrain-bench: writing %s failed: %s\n", o.json, strerror(errno));
        jerr = 1;
    }
    dt_finalize();
    return sum.wrong || failed || jerr ? 1 : 0;
}
