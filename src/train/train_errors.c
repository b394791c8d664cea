/* src/train/train_errors.c - the trainer's errors across its ranks: a failure
 * marked as the input's (the flags, data or checkpoint do not fit: dtrain-train
 * exits 2, dt_trainer_usage_error), and the first failing rank's status and
 * message on every rank (dt_trainer_agree_error), which keeps that mark.
 * Shared by the trainer's set-up, checks, loop and checkpoints. */
#include <stdio.h>
#include "core/error.h"
#include "dtrain/coll.h"
#include "train/trainer_internal.h"

static _Thread_local int g_input_error;

void dt_trainer_input_clear(void) { g_input_error = 0; }

int dt_trainer_mark_input(int rc) {
    if (rc < 0) g_input_error = 1;
    return rc;
}

int dt_trainer_input_marked(void) { return g_input_error; }

int dt_trainer_usage_error(void) { return g_input_error; }

/* The first failing rank's status and message, on every rank (so that every
 * rank stops with the same clear message instead of some waiting for the
 * others). Collective. */
int dt_trainer_agree_error(dt_trainer *t, int rc) {
    if (t->ci.size == 1) return rc;
    int v = rc < 0 ? t->ci.rank : t->ci.size;
    int brc = dt_allreduce(&v, &v, 1, DT_I32, DT_MIN, t->comm);
    if (brc) return brc;
    if (v == t->ci.size) return DT_OK;
    char msg[1024] = "";
    int st[2] = {rc, dt_trainer_input_marked()}; /* the status, and whether it is the input's fault */
    if (t->ci.rank == v) snprintf(msg, sizeof msg, "%s", dt_last_error());
    int root = dt_comm_world_rank_of(t->comm, v);
    if ((brc = dt_broadcast(msg, msg, sizeof msg, DT_U8, root, t->comm)) ||
        (brc = dt_broadcast(st, st, 2, DT_I32, root, t->comm)))
        return brc;
    if (t->ci.rank == v) return rc;
    msg[sizeof msg - 1] = '\0';
    char who[32];
    snprintf(who, sizeof who, "rank %d", v);
    rc = dt_error(st[0], who, "%s", msg);
    return st[1] ? dt_trainer_mark_input(rc) : rc;
}
