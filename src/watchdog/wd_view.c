/* src/watchdog/wd_view.c - what the watchdog makes of the ranks' states: the
 * view of every rank (this host's from the segment, the other hosts' from
 * their replies over the side channel), the analysis of a blocked operation
 * (departures, waits that go round in a circle) and the reports.
 *
 * Arrival is exact: a rank has entered call #s on communicator c exactly
 * when its progress entry for c holds a number >= s (wd_internal.h). With
 * the fingerprint check on, no rank completes a collective before every
 * member has entered it, so "m has not entered x's call" means x waits for
 * m. Point to point: x waits for its peer while it is in the header
 * exchange (phase 1) and the peer is not in the matching call. From that:
 *  - departure: a member of this rank's call is in dt_finalize (or exited,
 *    or finalised) and has not entered the call: it never will;
 *  - a circle: this rank waits for a, a waits for b, ..., which waits for
 *    this rank, all blocked: none can go on (a collective on one
 *    communicator facing one on another with other members, point to point
 *    facing a collective). A circle is confirmed on fresh states read in its
 *    order (each rank after the one that waits for it, which is then still
 *    waiting) before it is reported.
 * Either ends the job at once with a report naming the ranks, their hosts and
 * their calls. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "comm/op_kind.h"
#include "comm/registry.h"
#include "watchdog/watchdog.h"
#include "watchdog/wd_internal.h"
#include "bootstrap/tcp_wire.h"
#include "dtrain/reliability.h"
#include "transport/settings.h"

static wd_view *g_cache;        /* [size]: the other hosts' ranks, latest replies */
static uint64_t *g_cache_at;    /* [nhosts]: when (this host's clock), 0 never */
static uint64_t g_last_query;
static wd_view *g_snap;         /* [size]: one analysis' views */
static int *g_tmp;              /* [size] scratch */

static double secs(uint64_t ns) { return (double)ns / 1e9; }

void dt_wd_views_reset(void) {
    free(g_cache);
    free(g_cache_at);
    free(g_snap);
    free(g_tmp);
    size_t n = (size_t)(g_wd_size > 0 ? g_wd_size : 1);
    g_cache = calloc(n, sizeof *g_cache);
    g_cache_at = calloc((size_t)(g_wd_nhosts > 0 ? g_wd_nhosts : 1), sizeof *g_cache_at);
    g_snap = calloc(n, sizeof *g_snap);
    g_tmp = malloc(n * sizeof *g_tmp);
    g_last_query = 0;
}

static int ready(void) { return g_cache && g_cache_at && g_snap && g_tmp && g_wd_host_of; }

static int local(int w) { return g_wd_host_of && g_wd_host_of[w] == g_wd_host_of[g_wd_rank]; }

/* ---- views --------------------------------------------------------------------- */

static wd_slot *slot_of(int w) {
    for (int i = 0; g_wd_seg && i < g_wd_nslots; i++) {
        wd_slot *s = &g_wd_seg->slots[i];
        if (atomic_load_explicit(&s->state, memory_order_relaxed) != ST_EMPTY &&
            (int)atomic_load_explicit(&s->world_rank, memory_order_relaxed) == w)
            return s;
    }
    return NULL;
}

/* The latest view of rank w into v (0: nothing known). proc: also its /proc
 * state (local ranks; remote ones come with it). */
static int view_of(int w, wd_view *v, uint64_t now, int proc) {
    memset(v, 0, sizeof *v);
    v->world_rank = w;
    if (local(w)) {
        wd_slot *s = slot_of(w);
        if (!s) return 0;
        dt_wd_read_slot(s, v, now);
        if (proc && v->known) {
            v->pstate = dt_wd_proc_state(v->pid);
            v->gone = !v->pstate;
        }
        return v->known;
    }
    int h = g_wd_host_of[w];
    if (!g_cache[w].known || !g_cache_at[h]) return 0;
    *v = g_cache[w];
    uint64_t d = now > g_cache_at[h] ? now - g_cache_at[h] : 0; /* the reply's age */
    v->age_start += d;
    if (v->t_end_raw) v->age_end += d;
    if (v->age_heartbeat) v->age_heartbeat += d;
    return 1;
}

/* Ask the other hosts with want[h] set (NULL: all) for their ranks' states. */
static void refresh_hosts(const char *want, uint64_t now, long wait_ms) {
    if (!dt_wd_net_on() || !ready()) return;
    wd_view *fresh = calloc((size_t)g_wd_size, sizeof *fresh);
    if (!fresh) return;
    dt_wd_net_query(fresh, want, dt_tcp_now_ms() + wait_ms);
    uint64_t t = dt_wd_now();
    char *got = calloc((size_t)g_wd_nhosts, 1);
    for (int w = 0; got && w < g_wd_size; w++)
        if (fresh[w].known) { g_cache[w] = fresh[w]; got[g_wd_host_of[w]] = 1; }
    for (int h = 0; got && h < g_wd_nhosts; h++)
        if (got[h]) g_cache_at[h] = t;
    free(got);
    free(fresh);
    g_last_query = now;
}

/* ... one host (h >= 0) or all (-1). */
static void refresh(int h, uint64_t now, long wait_ms) {
    char *want = NULL;
    if (h >= 0 && (want = calloc((size_t)g_wd_nhosts, 1))) want[h] = 1;
    if (h < 0 || want) refresh_hosts(want, now, wait_ms);
    free(want);
}

static const char *who(char *buf, size_t cap, int w, uint64_t pid) {
    snprintf(buf, cap, "rank %d (pid %llu, host %s)", w, (unsigned long long)(pid ? pid : dt_wd_pid_of(w)),
             dt_wd_host_name(w));
    return buf;
}

static void describe(char *buf, size_t cap, const wd_view *v) {
    dt_op_describe_of(v->world_rank, buf, cap, (int)v->kind, (int)v->dtype, v->count, (int)v->op, v->root, v->seq,
                      (uint32_t)v->cid, (uint32_t)v->nlist, 0);
}

/* "was waiting in X for N s" / "its last call was X on C, N s before" / ... */
static void doing(char *buf, size_t cap, const wd_view *v) {
    char what[256], cn[96];
    if (v->in_op && v->state != ST_EMPTY) {
        describe(what, sizeof what, v);
        snprintf(buf, cap, "it was in %s for %.1f s", what, secs(v->age_start));
    } else if (v->t_end_raw) {
        snprintf(buf, cap, "its last call was %s #%llu on %s, %.1f s before", dt_op_kind_name((int)v->last_kind),
                 (unsigned long long)v->last_seq, dt_reg_name_of((uint32_t)v->last_cid, v->world_rank, cn, sizeof cn),
                 secs(v->age_end));
    } else {
        snprintf(buf, cap, "it had made no dtrain call");
    }
}

/* Where rank v->world_rank is now, for the stall report: "waiting in X for N s",
 * "not in a dtrain call for N s; its last call was X #S on C", "in
 * dt_finalize", "dead (its process is gone)", ... */
static void where_now(char *buf, size_t cap, const wd_view *v) {
    char what[256], cn[96];
    if (v->state == ST_EXITED) snprintf(buf, cap, "exited without calling dt_finalize");
    else if ((v->state == ST_RUNNING || v->state == ST_FINALIZING) && v->gone)
        snprintf(buf, cap, "dead (its process is gone)");
    else if (v->state == ST_FINALIZING) snprintf(buf, cap, "in dt_finalize");
    else if (v->state == ST_FINALIZED) snprintf(buf, cap, "finalized");
    else if (v->in_op) {
        describe(what, sizeof what, v);
        snprintf(buf, cap, "waiting in %s for %.1f s", what, secs(v->age_start));
    } else if (v->t_end_raw) {
        snprintf(buf, cap, "not in a dtrain call for %.1f s; its last call was %s #%llu on %s", secs(v->age_end),
                 dt_op_kind_name((int)v->last_kind), (unsigned long long)v->last_seq,
                 dt_reg_name_of((uint32_t)v->last_cid, v->world_rank, cn, sizeof cn));
    } else {
        snprintf(buf, cap, "has made no dtrain call yet");
    }
}

static const char *pstate_words(char st) {
    switch (st) {
    case 'T': return "stopped (/proc state T: SIGSTOP, SIGTSTP or a debugger; SIGCONT resumes it)";
    case 't': return "stopped (/proc state t: held by a debugger)";
    case 'D': return "in uninterruptible sleep (/proc state D: blocked in the kernel, e.g. on I/O)";
    case 'Z': case 'X': return "dead (/proc state Z: it has ended)";
    default: return NULL;
    }
}

static int stopped(const wd_view *v) { return v->pstate == 'T' || v->pstate == 't'; }

/* ---- members and arrival ------------------------------------------------------- */

static int members(const wd_view *v, int *out) {
    if (v->kind == DT_COLL_SEND || v->kind == DT_COLL_RECV) {
        out[0] = v->world_rank;
        out[1] = v->root;
        return v->root >= 0 && v->root < g_wd_size ? 2 : 1;
    }
    if (v->kind >= 64) {
        for (int i = 0; i < g_wd_size; i++) out[i] = i;
        return g_wd_size;
    }
    return dt_reg_members_of((uint32_t)v->cid, v->world_rank, out, g_wd_size);
}

/* Has m entered x's call (or passed it)? 1 yes, 0 certainly not, -1 unknown. */
static int arrived(const wd_view *m, const wd_view *x, int check) {
    if (x->kind == DT_OP_FINALIZE) return m->state == ST_FINALIZING || m->state == ST_FINALIZED;
    if (x->kind == DT_COLL_SEND || x->kind == DT_COLL_RECV) {
        uint64_t want = x->kind == DT_COLL_SEND ? DT_COLL_RECV : DT_COLL_SEND;
        if (m->in_op && m->state == ST_RUNNING && m->kind == want && m->cid == x->cid && m->root == x->world_rank &&
            m->seq == x->seq)
            return 1;
        return check && x->phase == 1 ? 0 : -1;
    }
    uint64_t e = m->prog[x->cid % WD_PROG];
    if (WD_PROG_CID(e) != (uint32_t)x->cid) return -1;
    return WD_PROG_SEQ(e) >= x->seq;
}

static int blocked(const wd_view *v) {
    return v->known && v->state == ST_RUNNING && v->in_op && v->kind != DT_OP_FINALIZE;
}

static int left(const wd_view *v) {
    return v->known && (v->state == ST_FINALIZING || v->state == ST_FINALIZED || v->state == ST_EXITED);
}

/* ---- ending the job ------------------------------------------------------------- */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = k < 0 ? 0 : (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1, off = 0;
    while (off < n) {
        ssize_t w = write(2, buf + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

/* The first line of a report goes to the other hosts, then the job ends. */
static void end_job(const char *line) {
    dt_wd_net_notify_end(line);
    dt_wd_abort_job(0);
}

/* ---- departures and circles ------------------------------------------------------ */

static void report_departure(const wd_view *gone, const wd_view *waiter) {
    uint64_t prev;
    int first = dt_wd_claim_report(gone->world_rank, &prev);
    if (!first) { dt_wd_abort_job(2000); return; }
    char a[160], b[160], what[256], cn[96], how[160], line[1200];
    uint64_t e = gone->prog[waiter->cid % WD_PROG];
    dt_reg_name_of((uint32_t)waiter->cid, gone->world_rank, cn, sizeof cn);
    if (waiter->kind == DT_COLL_SEND || waiter->kind == DT_COLL_RECV)
        snprintf(how, sizeof how, "%s", "");
    else if (WD_PROG_CID(e) == (uint32_t)waiter->cid && WD_PROG_SEQ(e))
        snprintf(how, sizeof how, " (its last call on %s was #%llu)", cn, (unsigned long long)WD_PROG_SEQ(e));
    else
        snprintf(how, sizeof how, " (it made no call on %s)", cn);
    describe(what, sizeof what, waiter);
    snprintf(line, sizeof line, "dtrain: %s left the job: it %s%s while %s waits in %s, which rank %d never entered",
             who(a, sizeof a, gone->world_rank, gone->pid),
             gone->state == ST_EXITED ? "exited without calling dt_finalize"
             : gone->state == ST_FINALIZED ? "has finalised" : "is in dt_finalize",
             how, who(b, sizeof b, waiter->world_rank, waiter->pid), what, gone->world_rank);
    say("%s. Aborting the job (exit code %d)\n", line, DT_ABORT_EXIT_CODE);
    end_job(line);
}

/* Depth-first search for a circle of waits through `me`: path[0] = me. */
static int circle(int x, int *path, int depth, char *seen, int check) {
    const wd_view *vx = &g_snap[x];
    int n = members(vx, g_tmp);
    int *mine = malloc(sizeof *mine * (size_t)(n > 0 ? n : 1));
    if (!mine) return 0;
    memcpy(mine, g_tmp, sizeof *mine * (size_t)n);
    for (int i = 0; i < n; i++) {
        int m = mine[i];
        if (m == x || m < 0 || m >= g_wd_size) continue;
        const wd_view *vm = &g_snap[m];
        if (!blocked(vm) || arrived(vm, vx, check) != 0) continue;
        if (m == path[0]) { free(mine); return depth; }
        if (seen[m] || depth >= 64) continue;
        seen[m] = 1;
        path[depth] = m;
        int d = circle(m, path, depth + 1, seen, check);
        if (d) { free(mine); return d; }
    }
    free(mine);
    return 0;
}

/* Fresh states of the circle's ranks in its order (each after the one that
 * waits for it); 1 if every wait still holds. */
static int confirm(const int *path, int n, uint64_t now, int check) {
    wd_view *v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return 0;
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        int w = path[i];
        if (!local(w)) refresh(g_wd_host_of[w], now, 1000);
        ok = view_of(w, &v[i], dt_wd_now(), 0) && blocked(&v[i]);
        if (ok && i > 0) {
            ok = arrived(&v[i], &v[i - 1], check) == 0;
            if (ok && (v[i - 1].kind == DT_COLL_SEND || v[i - 1].kind == DT_COLL_RECV)) {
                /* the waiter must still be in the same exchange */
                int p = path[i - 1];
                if (!local(p)) refresh(g_wd_host_of[p], now, 1000);
                wd_view again;
                ok = view_of(p, &again, dt_wd_now(), 0) && again.in_op && again.kind == v[i - 1].kind &&
                     again.cid == v[i - 1].cid && again.seq == v[i - 1].seq && again.root == v[i - 1].root &&
                     again.phase == 1;
            }
        }
    }
    if (ok) ok = arrived(&v[0], &v[n - 1], check) == 0; /* and the last waits for the first */
    if (ok) /* the report describes these states */
        for (int i = 0; i < n; i++) g_snap[path[i]] = v[i];
    free(v);
    return ok;
}

static void report_circle(const int *path, int n) {
    uint64_t prev;
    int first = dt_wd_claim_report(-1, &prev);
    if (!first) { dt_wd_abort_job(2000); return; }
    char line[4096], a[160], what[256];
    size_t k = 0;
    k += (size_t)snprintf(line + k, sizeof line - k, "dtrain: collective mismatch across communicators (seen by rank %d): ",
                          g_wd_rank);
    for (int i = 0; i < n && k < sizeof line; i++) {
        const wd_view *v = &g_snap[path[i]];
        describe(what, sizeof what, v);
        k += (size_t)snprintf(line + k, sizeof line - k, "%s waits in %s for rank %d; ", who(a, sizeof a, path[i], v->pid),
                              what, path[(i + 1) % n]);
    }
    if (k < sizeof line)
        snprintf(line + k, sizeof line - k, "none of them can go on: the ranks called collectives (or point-to-point "
                 "calls) on different communicators in different orders");
    say("%s. Aborting the job (exit code %d)\n", line, DT_ABORT_EXIT_CODE);
    end_job(line);
}

void dt_wd_analyse(const wd_view *me, uint64_t now) {
    if (!ready() || me->age_start < 50000000ull) return;
    int check = dt_rel_check_on();
    /* the other hosts' ranks this rank waits for, once it has waited half a
     * second: again every second, less often as the wait grows (a quarter
     * of it, at most every 10 s); only hosts with a member of this call that
     * has not arrived as far as this rank knows (arrival is final). A rank in
     * dt_finalize asks nobody: those waiting for it ask its host. */
    uint64_t every = me->age_start / 4;
    if (every < 1000000000ull) every = 1000000000ull;
    if (every > 10000000000ull) every = 10000000000ull;
    if (dt_wd_net_on() && me->kind != DT_OP_FINALIZE && me->age_start >= 500000000ull && now - g_last_query >= every) {
        char *want = calloc((size_t)g_wd_nhosts, 1);
        int any = 0, n = members(me, g_tmp);
        for (int i = 0; want && i < n; i++) {
            int w = g_tmp[i];
            if (local(w)) continue;
            wd_view v;
            if (!view_of(w, &v, now, 0) || arrived(&v, me, check) != 1)
                any = want[g_wd_host_of[w]] = 1;
        }
        if (any) refresh_hosts(want, now, 1000);
        else g_last_query = now;
        free(want);
    }
    for (int w = 0; w < g_wd_size; w++) view_of(w, &g_snap[w], now, 0);
    g_snap[g_wd_rank] = *me;
    if (me->kind == DT_OP_FINALIZE) {
        /* this rank left: does a rank still wait for one of its calls? */
        for (int w = 0; w < g_wd_size; w++) {
            const wd_view *v = &g_snap[w];
            if (w == g_wd_rank || !blocked(v)) continue;
            int n = members(v, g_tmp), in = 0;
            for (int i = 0; i < n && !in; i++) in = g_tmp[i] == g_wd_rank;
            if (in && arrived(me, v, check) == 0 && (check || v->age_start >= 1000000000ull)) {
                wd_view self = *me;
                self.state = ST_FINALIZING;
                report_departure(&self, v);
                return;
            }
        }
        return;
    }
    /* a member of this call left without entering it */
    int n = members(me, g_tmp);
    for (int i = 0; i < n; i++) {
        const wd_view *v = &g_snap[g_tmp[i]];
        if (g_tmp[i] == g_wd_rank || !left(v)) continue;
        if (arrived(v, me, check) == 0 && (check || me->age_start >= 1000000000ull)) {
            report_departure(v, me);
            return;
        }
    }
    if (!check) return;
    /* a circle of waits through this rank */
    char *seen = calloc((size_t)g_wd_size, 1);
    int *path = malloc(sizeof *path * 65);
    if (seen && path) {
        path[0] = g_wd_rank;
        seen[g_wd_rank] = 1;
        int d = circle(g_wd_rank, path, 1, seen, check);
        if (d && confirm(path, d, now, check)) {
            report_circle(path, d);
            free(seen);
            free(path);
            return;
        }
    }
    free(seen);
    free(path);
}

/* ---- the stall report ------------------------------------------------------------ */

void dt_wd_report_stall(const wd_view *me, uint64_t now) {
    char what[256], at[512], a[160];
    uint64_t prev;
    int first = dt_wd_claim_report(-1, &prev);
    describe(what, sizeof what, me);
    double waited = secs(me->age_start), to = dt_wd_timeout();
    if (!first) {
        say("dtrain: STALL on rank %d (host %s): %s has not completed after %.1f s (timeout %g s); "
            "see the stall report printed by rank %d of this host\n",
            g_wd_rank, g_wd_host, what, waited, to, (int)(prev & 0xffffffffu) - 1);
        dt_wd_abort_job(2000);
        return;
    }
    size_t cap = 65536;
    char *b = malloc(cap), *nb = malloc(cap);
    int *mem = malloc(sizeof(int) * (size_t)(g_wd_size > 2 ? g_wd_size : 2));
    int *arr = malloc(sizeof(int) * (size_t)(g_wd_size + 1)), *far = malloc(sizeof(int) * (size_t)(g_wd_size + 1));
    if (!b || !nb || !mem || !arr || !far) {
        say("dtrain: STALL on rank %d (host %s): %s has not completed after %.1f s (timeout %g s); aborting the job "
            "(exit code %d)\n", g_wd_rank, g_wd_host, what, waited, to, DT_ABORT_EXIT_CODE);
        dt_wd_abort_job(0);
        return;
    }
    size_t k = 0, kn = 0;
#define ADD(buf, n, ...) do { if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__); } while (0)
    ADD(b, k, "dtrain: STALL on rank %d (host %s): %s has not completed after %.1f s "
              "(timeout %g s; DTRAIN_TIMEOUT / dt_set_timeout)\n", g_wd_rank, g_wd_host, what, waited, to);
    int n = members(me, mem);
    /* the other hosts' ranks: ask for them now (a stopped rank cannot
     * answer, its host-mates can) */
    int remote = 0;
    for (int i = 0; i < n; i++) remote |= !local(mem[i]);
    if (remote) refresh(-1, now, 1500);
    now = dt_wd_now();
    int na = 0, nfar = 0, nnot = 0, nstop = 0, npast = 0;
    for (int i = 0; i < n; i++) {
        int w = mem[i];
        if (w == g_wd_rank) { arr[na++] = w; continue; }
        wd_view p;
        if (!view_of(w, &p, now, 1)) { far[nfar++] = w; continue; }
        const char *ps = pstate_words(p.pstate);
        int still = p.in_op && p.kind == me->kind && p.cid == me->cid && p.seq == me->seq && p.state == ST_RUNNING;
        if (still || arrived(&p, me, 0) == 1) {
            arr[na++] = w;
            if (ps && (stopped(&p) || p.pstate == 'D')) {
                nstop++;
                ADD(nb, kn, "dtrain:   arrived, but cannot go on: %s: its process is %s\n", who(a, sizeof a, w, p.pid), ps);
            } else if (!still) { /* it completed this call: where it is now */
                npast++;
                where_now(at, sizeof at, &p);
                ADD(nb, kn, "dtrain:   completed it and went on: %s: %s\n", who(a, sizeof a, w, p.pid), at);
            }
            continue;
        }
        nnot++;
        ADD(nb, kn, "dtrain:   not arrived: %s: ", who(a, sizeof a, w, p.pid));
        where_now(at, sizeof at, &p);
        ADD(nb, kn, "%s", at);
        if (ps && !p.gone) ADD(nb, kn, "; its process is %s", ps);
        else if (p.age_heartbeat > 5000000000ull && !p.gone)
            ADD(nb, kn, " (its watchdog has not run for %.1f s: process stopped or starved?)", secs(p.age_heartbeat));
        ADD(nb, kn, "\n");
    }
    ADD(b, k, "dtrain:   arrived (%d of %d): ", na, n);
    for (int i = 0; i < na; i++) ADD(b, k, "%s%d", i ? "," : "", arr[i]);
    ADD(b, k, "\n");
    if (kn) ADD(b, k, "%s", nb);
    if (nfar) {
        ADD(b, k, "dtrain:   %s: ", dt_wd_net_on() ? "on other hosts that did not answer (state not visible from here)"
                                  : g_wd_seg ? "on other hosts (state not visible from here)"
                                             : "state not visible (no shared-memory segment on this host)");
        for (int i = 0; i < nfar; i++) ADD(b, k, "%s%d", i ? "," : "", far[i]);
        ADD(b, k, "\n");
    }
    if (!nnot && !nfar && n > 0) {
        if (nstop) ADD(b, k, "dtrain:   every rank of the group has arrived, but a stopped rank cannot go on: "
                              "continue it (kill -CONT PID) or end the job\n");
        else if (npast)
            ADD(b, k, "dtrain:   every rank of the group has arrived and %d of them completed it (above): the "
                      "transport holds the others\n", npast);
        else ADD(b, k, "dtrain:   every rank of the group has arrived: the transport itself is stuck\n");
    }
    if (n == 0) ADD(b, k, "dtrain:   (members of the communicator unknown)\n");
    ADD(b, k, "dtrain: ranks that have not arrived skipped this call, are stuck elsewhere or died; "
              "aborting the job (exit code %d)\n", DT_ABORT_EXIT_CODE);
#undef ADD
    size_t off = 0;
    while (off < k) {
        ssize_t w = write(2, b + off, k - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    char first_line[512];
    snprintf(first_line, sizeof first_line, "%.*s", (int)strcspn(b, "\n"), b);
    free(b);
    free(nb);
    free(mem);
    free(arr);
    free(far);
    end_job(first_line);
}

/* ---- lost ranks -------------------------------------------------------------------- */

static void this_rank_doing(char *buf, size_t cap, uint64_t now) {
    wd_view me;
    (void)now;
    if (view_of(g_wd_rank, &me, dt_wd_now(), 0) && me.in_op) {
        char what[256];
        describe(what, sizeof what, &me);
        snprintf(buf, cap, "this rank was waiting in %.200s for %.1f s", what, secs(me.age_start));
    } else {
        snprintf(buf, cap, "this rank was not in a dtrain call");
    }
}

static const char *cause_words(int cause) {
    switch (cause) {
    case WD_LOST_EXITED: return "exited without calling dt_finalize";
    case WD_LOST_LINK: return "died or its host went down (its watchdog's connection closed without a goodbye) "
                              "before dt_finalize";
    default: return "died (killed by a signal or crashed) before dt_finalize";
    }
}

void dt_wd_report_dead(int si, uint64_t now) {
    wd_view p;
    dt_wd_read_slot(&g_wd_seg->slots[si], &p, now);
    uint64_t prev;
    int first = dt_wd_claim_report(p.world_rank, &prev);
    if (!first && (prev >> 32) != (uint64_t)p.world_rank + 1) {
        /* another rank of this host is already ending the job (a stall, or
         * another lost rank): this death is most likely that abort at work */
        dt_wd_abort_job(2000);
        return;
    }
    int cause = p.state == ST_EXITED ? WD_LOST_EXITED : WD_LOST_DIED;
    char d[400], mine[400], a[160];
    doing(d, sizeof d, &p);
    this_rank_doing(mine, sizeof mine, now);
    say("dtrain: rank %d: lost %s: the process %s; %s; %s. Aborting the job (exit code %d)\n", g_wd_rank,
        who(a, sizeof a, p.world_rank, p.pid), cause_words(cause), d, mine, DT_ABORT_EXIT_CODE);
    /* the other hosts learn it at once (the first rank of this host tells them) */
    if (first) dt_wd_net_notify_lost(p.world_rank, p.pid, cause, d);
    dt_wd_abort_job(first ? 0 : 1000);
}

void dt_wd_report_remote_lost(int w, uint64_t pid, int cause, const char *what, int by, uint64_t now) {
    if (w < 0 || w >= g_wd_size) return;
    uint64_t prev;
    int first = dt_wd_claim_report(w, &prev);
    if (!first && (prev >> 32) != (uint64_t)w + 1) {
        dt_wd_abort_job(2000);
        return;
    }
    char mine[400], a[160], seen[200] = "";
    this_rank_doing(mine, sizeof mine, now);
    if (by != g_wd_rank) snprintf(seen, sizeof seen, " (seen by rank %d on host %s)", by, dt_wd_host_name(by));
    say("dtrain: rank %d: lost %s: the process %s%s%s%s; %s. Aborting the job (exit code %d)\n", g_wd_rank,
        who(a, sizeof a, w, pid), cause_words(cause), what && *what ? "; " : "", what ? what : "", seen, mine,
        DT_ABORT_EXIT_CODE);
    /* learnt here (the ring): tell everyone else */
    if (by == g_wd_rank && first) dt_wd_net_notify_lost(w, pid, cause, what);
    dt_wd_abort_job(first ? 0 : 1000);
}

void dt_wd_report_remote_end(int by, const char *text) {
    uint64_t prev;
    if (!dt_wd_claim_report(-1, &prev)) { dt_wd_abort_job(2000); return; }
    say("dtrain: rank %d (host %s): the job ends: rank %d (host %s) reported: %s\n", g_wd_rank, g_wd_host, by,
        dt_wd_host_name(by), text && *text ? text : "(no reason given)");
    dt_wd_abort_job(0);
}

void dt_wd_report_device_error(const char *msg) {
    uint64_t prev;
    if (!dt_wd_claim_report(-1, &prev)) { dt_wd_abort_job(2000); return; }
    say("dtrain: rank %d (host %s): %s. Aborting the job (exit code %d)\n", g_wd_rank, g_wd_host, msg,
        DT_ABORT_EXIT_CODE);
    dt_wd_abort_job(0);
}
