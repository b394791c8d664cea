/* tests/testutil.h - tiny assertion helpers shared by the test programs.
 * Each failed check prints file:line and the condition; dt_test_finish()
 * prints "N passed, N failed" and returns the process exit code. */
#ifndef DT_TESTUTIL_H
#define DT_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "dtrain/dtrain.h"
#include "dtrain/model.h"

extern int dt_test_passed, dt_test_failed;
extern int dt_test_rank; /* world rank used in messages, -1 before init */

void dt_test_fail(const char *file, int line, const char *fmt, ...);

#define CHECK(cond, ...) do { if (cond) dt_test_passed++; \
    else { dt_test_fail(__FILE__, __LINE__, "CHECK(%s) ", #cond); \
           fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)
#define CHECK_OK(expr) do { int rc_ = (expr); if (rc_ == DT_OK) dt_test_passed++; \
    else dt_test_fail(__FILE__, __LINE__, "%s -> %s: %s\n", #expr, \
                      dt_status_str(rc_), dt_last_error()); } while (0)
/* Asserts that expr returns status st and that dt_last_error() contains sub. */
#define CHECK_ERR(expr, st, sub) do { dt_clear_error(); int rc_ = (expr); \
    if (rc_ == (st) && strstr(dt_last_error(), (sub)) != NULL) dt_test_passed++; \
    else dt_test_fail(__FILE__, __LINE__, "%s -> %s (want %s), message '%s' (want '%s')\n", \
                      #expr, dt_status_str(rc_), dt_status_str(st), dt_last_error(), sub); \
    } while (0)

/* max|a[i] - b[i]| / max|b[i]| over n elements (the relative error measure of
 * the equivalence tests; 0 when identical). */
double dt_test_rel_err(const float *a, const float *b, size_t n);

/* 1 if dt_last_error() contains one of the '|'-separated alternatives
 * (case-insensitive), e.g. "count|overflow". */
int dt_test_msg_has(const char *alts);

/* A communicator in which every world rank is alone (rank_list [[0],[1],...]):
 * the single-process reference of the equivalence tests, run on each rank.
 * Collective over the world; NULL (and a failed check) on error. */
dt_comm *dt_test_solo_comm(void);

/* Whether a result has the same bits on every rank of comm (collective):
 * dt_test_same_on_all compares a hash h of it (the library's dt_fnv1a from
 * DT_FNV_BASIS, comm/comm_internal.h; chained for several arrays) through
 * one allreduce of (h, -h) with max; dt_test_same_bits hashes `bytes` bytes
 * of buf first. 1 if every rank has the same, 0 if not, a negative dt_status
 * if the allreduce failed (its message in dt_last_error()). */
int dt_test_same_on_all(uint64_t h, dt_comm *comm);
int dt_test_same_bits(const void *buf, size_t bytes, dt_comm *comm);

/* A fresh directory for a test's files: $TMPDIR (else /tmp)/<prefix>XXXXXX,
 * made by mkdtemp. Returns its path (static storage, kept until
 * dt_test_tmpdir_remove), or NULL after printing why it could not be made.
 * dt_test_path(name) is "<dir>/<name>" in one of 4 rotating buffers (up to
 * 4 results in use at once). dt_test_tmpdir_remove() deletes the directory
 * and everything in it (rm -rf). One directory per process. */
const char *dt_test_tmpdir(const char *prefix);
const char *dt_test_path(const char *name);
void dt_test_tmpdir_remove(void);

/* A gpt of L blocks, NH heads, width C, block size T and vocabulary V
 * ("gpt-demo"'s other settings) with `seed`, on `device` in `precision`;
 * NULL after a failed check. dt_test_tokens: n tokens below V drawn from
 * `seed` into x and their next-token targets into y (the last one x[0]). */
dt_model *dt_test_gpt(int L, int NH, int C, int T, int V, uint64_t seed, int device, int precision);
void dt_test_tokens(uint64_t seed, int V, int n, int32_t *x, int32_t *y);

/* Prints the summary line; returns 0 if nothing failed, 1 otherwise. */
int dt_test_finish(const char *name);

#endif
