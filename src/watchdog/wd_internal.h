/* src/watchdog/wd_internal.h - internal to the watchdog (watchdog.c: slots,
 * publication, the thread; wd_view.c: what every rank is doing and the
 * reports; wd_net.c: the side channel between hosts). Nothing outside
 * src/watchdog/ includes it. */
#ifndef DT_WATCHDOG_WD_INTERNAL_H
#define DT_WATCHDOG_WD_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ---- a rank's published state ------------------------------------------------
 * One slot per process, in its host's shared segment (watchdog.c). */
enum { ST_EMPTY = 0, ST_RUNNING = 1, ST_FINALIZING = 2, ST_FINALIZED = 3, ST_EXITED = 4 };

/* Progress: for the communicators of the last WD_PROG creation indices, the
 * sequence number of the last collective (or creation / release on the
 * world) this rank ENTERED, as cid << 40 | seq in entry cid % WD_PROG. A
 * rank has arrived at (or passed) call #s on cid exactly when its entry
 * holds cid and a number >= s; an entry holding another cid means unknown. */
#define WD_PROG 64
#define WD_PROG_CID(v) ((uint32_t)((v) >> 40))
#define WD_PROG_SEQ(v) ((v) & ((1ull << 40) - 1))

typedef struct wd_slot {
    _Atomic uint64_t gen; /* sequence lock of the op fields: odd while written */
    _Atomic uint64_t state, world_rank, pid, starttime, heartbeat;
    _Atomic uint64_t in_op, kind, cid, seq, dtype, count, root, op, nlist, t_start;
    _Atomic uint64_t last_kind, last_cid, last_seq, t_end;
    /* 0: not in an operation or no check; 1: the point-to-point header
     * exchange (the peer has not necessarily arrived); 2: past it */
    _Atomic uint64_t phase;
    _Atomic uint64_t prog[WD_PROG];
    uint64_t pad[3];
} wd_slot;

typedef struct wd_seg {
    /* reported: 0, or (dead world rank + 1) << 32 | (reporting world rank + 1)
     * of the first report of this host (dead rank 0 for a stall) */
    _Atomic uint64_t magic, nslots, reported;
    uint64_t pad[5];
    wd_slot slots[];
} wd_seg;

/* What is known of one rank, from its slot on this host or from a reply of
 * its host over the side channel. Times are ages (ns before `now` of the
 * reader), so they compare across hosts. */
typedef struct wd_view {
    int known;            /* 0: nothing known */
    int world_rank;
    uint64_t pid, state, in_op, kind, cid, seq, dtype, count, op, nlist, phase;
    int root;
    uint64_t age_start, age_end, age_heartbeat; /* 0 age_end: no call completed yet */
    uint64_t last_kind, last_cid, last_seq;
    uint64_t t_end_raw;   /* 0: no call completed yet */
    char pstate;          /* /proc/<pid>/stat state ('R', 'S', 'T', ...), 0 unknown */
    int gone;             /* its process is gone (local: kill(pid, 0); remote: declared lost) */
    uint64_t prog[WD_PROG];
    uint64_t gen;         /* the slot's sequence-lock value when read (an operation's instance) */
} wd_view;

/* ---- watchdog.c --------------------------------------------------------------- */
extern wd_seg *g_wd_seg;       /* this host's segment, NULL if none */
extern int g_wd_nslots;
extern int g_wd_rank, g_wd_size;
extern char g_wd_host[64];
/* every rank's host index, pid and host name (from the start-up exchange) */
extern const int *g_wd_host_of;
extern int g_wd_nhosts;
uint64_t dt_wd_now(void);
/* Read slot s into v (ages against now). */
void dt_wd_read_slot(wd_slot *s, wd_view *v, uint64_t now);
/* /proc/<pid>/stat's state letter, 0 if unreadable. */
char dt_wd_proc_state(uint64_t pid);
/* The host name and pid of world rank w ("?" / 0 unknown). */
const char *dt_wd_host_name(int w);
uint64_t dt_wd_pid_of(int w);
/* End the job (a reaper _exit()s 10 s later if that does not end this
 * process); after wait_ms when another rank is reporting. */
void dt_wd_abort_job(int wait_ms);
/* 1 if this rank is the first of its host to report (always without a
 * segment); *prev: the earlier claim. dead: the lost world rank, -1 else. */
int dt_wd_claim_report(int dead, uint64_t *prev);

/* ---- wd_view.c: views, analysis, reports --------------------------------------- */
/* The watchdog's per-iteration look at this rank's blocked operation `me`:
 * departures and waits that cross communicators (they end the job, reported);
 * queries other hosts when it needs their ranks. */
void dt_wd_analyse(const wd_view *me, uint64_t now);
/* The stall report of `me`, then the job ends. */
void dt_wd_report_stall(const wd_view *me, uint64_t now);
/* A local rank whose process ended (its slot index), then the job ends. */
void dt_wd_report_dead(int slot, uint64_t now);
/* A rank of another host lost (learnt over the side channel). */
void dt_wd_report_remote_lost(int w, uint64_t pid, int cause, const char *what, int by, uint64_t now);
/* Another host's rank ended the job: text is its first report line. */
void dt_wd_report_remote_end(int by, const char *text);
/* The device transport reported an asynchronous error (msg: what it said):
 * one line, then the job ends. */
void dt_wd_report_device_error(const char *msg);
void dt_wd_views_reset(void);

/* causes of a loss */
enum { WD_LOST_DIED = 1, WD_LOST_EXITED = 2, WD_LOST_LINK = 3 };

/* ---- wd_net.c: the side channel between hosts ----------------------------------- */
/* Collective over the bootstrap (every rank calls it): every rank's host name
 * and pid, and where jobs span hosts, a listening socket per rank and the
 * ring of the hosts' first ranks. Failures only reduce what it offers. */
int dt_wd_net_start(void);
/* The responder thread (after the segment exists). */
void dt_wd_net_run(void);
/* dt_finalize began (the ring hears it: its end is then normal), and the
 * end of a completed one (goodbye). */
void dt_wd_net_finalizing(void);
void dt_wd_net_stop(void);
/* The process exits without dt_finalize (atexit). */
void dt_wd_net_departing(void);
/* 1 if jobs span hosts and the channel is up. */
int dt_wd_net_on(void);
/* Fill views[w] for the ranks of the other hosts with their host's latest
 * state: the hosts h != this one with want[h] set (want NULL: all). Waits
 * until deadline_ms (monotonic ms). Returns the number of hosts that
 * answered. */
int dt_wd_net_query(wd_view *views, const char *want, long long deadline_ms);
/* Tell every rank of the other hosts that world rank `lost` (pid) was lost
 * (cause, what it was doing) / that this rank ends the job (kind END, text). */
void dt_wd_net_notify_lost(int lost, uint64_t pid, int cause, const char *what);
void dt_wd_net_notify_end(const char *text);
/* What the responder received (the main thread takes it): 1 if there was. */
typedef struct wd_notice {
    int kind;      /* 1 lost, 2 end */
    int subject;   /* lost world rank */
    uint64_t pid;
    int cause;
    int by;        /* the world rank that sent it */
    char text[512];
} wd_notice;
int dt_wd_net_take(wd_notice *n);
/* Wake the watchdog's thread (watchdog.c; the responder calls it). */
void dt_wd_net_wake(void);

#endif
