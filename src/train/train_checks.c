/* src/train/train_checks.c - the trainer's checks before it trains: the ranks
 * were started alike (every flag that shapes the sequence of collectives, the
 * dist config, the data set sizes, the resumed position), and every output
 * path is usable. Each failure ends every rank with a message naming what
 * differs, instead of some ranks waiting in a collective the others never
 * call (a hang until the watchdog's timeout). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/ckpt.h"
#include "dtrain/coll.h"
#include "dtrain/safetensors.h"
#include "dtrain/trace.h"
#include "train/trainer_internal.h"

/* ---- values every rank must agree on ------------------------------------------ */

#define MAX_FIELDS 64

typedef struct field {
    char name[40];
    char val[80];
} field;

typedef struct fields {
    field f[MAX_FIELDS];
    int n;
} fields;

static void add(fields *fs, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(fields *fs, const char *name, const char *fmt, ...) {
    if (fs->n >= MAX_FIELDS) return;
    field *f = &fs->f[fs->n++];
    snprintf(f->name, sizeof f->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->val, sizeof f->val, fmt, ap);
    va_end(ap);
}

/* The dist config, key by key, as its flags (--zero-opt-level 1). */
static void add_config(fields *fs, const dt_config *c) {
    char json[1024];
    dt_config_to_json(c, json, sizeof json);
    for (char *p = json; (p = strchr(p, '"')) != NULL;) {
        char *k = p + 1, *ke = strchr(k, '"');
        if (!ke || ke[1] != ':') break;
        char *v = ke + 2;
        while (*v == ' ') v++;
        size_t vl = strcspn(v, ",}");
        char name[40] = "--";
        size_t kl = (size_t)(ke - k) < sizeof name - 3 ? (size_t)(ke - k) : sizeof name - 3;
        memcpy(name + 2, k, kl);
        name[2 + kl] = '\0';
        for (char *q = name + 2; *q; q++) if (*q == '_') *q = '-';
        add(fs, name, "%.*s", (int)vl, v);
        p = v + vl;
    }
}

static unsigned long long fnv(const char *s) {
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h;
}

/* Compares every field across the ranks (one allreduce); on a difference,
 * every rank returns DT_ERR_MISMATCH: "<what>: --x, --y differ between ranks
 * (world rank R has --x V, --y W)". Collective. */
static int agree(dt_trainer *t, const fields *fs, const char *what, const char *todo) {
    if (t->ci.size == 1) return DT_OK;
    long long v[2 * MAX_FIELDS];
    for (int i = 0; i < fs->n; i++) {
        v[i] = (long long)(fnv(fs->f[i].val) >> 1);
        v[fs->n + i] = -v[i];
    }
    int rc = dt_allreduce(v, v, 2 * (size_t)fs->n, DT_I64, DT_MAX, t->comm);
    if (rc) return rc;
    char names[512] = "", mine[1024] = "";
    size_t nn = 0, nm = 0;
    int ndiff = 0;
    for (int i = 0; i < fs->n; i++) {
        if (v[i] == -v[fs->n + i]) continue; /* max == min: the same everywhere */
        ndiff++;
        nn += (size_t)snprintf(names + nn, nn < sizeof names ? sizeof names - nn : 0, "%s%s", ndiff > 1 ? ", " : "",
                               fs->f[i].name);
        nm += (size_t)snprintf(mine + nm, nm < sizeof mine ? sizeof mine - nm : 0, "%s%s %s", ndiff > 1 ? ", " : "",
                               fs->f[i].name, fs->f[i].val);
        if (nn >= sizeof names || nm >= sizeof mine) break;
    }
    if (!ndiff) return DT_OK;
    return dt_error(DT_ERR_MISMATCH, "dt_trainer_create", "%s: %s differ%s between ranks (world rank %d has %s); %s",
                    what, names, ndiff == 1 ? "s" : "", t->ci.world_rank, mine, todo);
}

int dt_trainer_check_flags(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    fields fs;
    fs.n = 0;
    /* what is trained, in which order, with which collectives */
    add(&fs, "--model", "%s", o->model);
    add(&fs, "--hidden1", "%d", o->hidden1);
    add(&fs, "--hidden2", "%d", o->hidden2);
    add(&fs, "--channels1", "%d", o->conv_channels1);
    add(&fs, "--channels2", "%d", o->conv_channels2);
    add(&fs, "--dropout", "%.9g", o->dropout);
    add(&fs, "--preset", "%s", o->preset);
    add(&fs, "--n-layer", "%d", o->n_layer);
    add(&fs, "--n-head", "%d", o->n_head);
    add(&fs, "--n-embd", "%d", o->n_embd);
    add(&fs, "--block-size", "%d", o->block_size);
    add(&fs, "--seq-len", "%d", o->seq_len);
    add(&fs, "--recompute", "%d", o->recompute);
    add(&fs, "--device", "%s", o->device);
    add(&fs, "--precision", "%s", o->precision);
    add(&fs, "--epochs", "%d", o->epochs);
    add(&fs, "--batch-size", "%d", o->batch_size);
    add(&fs, "--lr", "%.17g", o->lr);
    add(&fs, "--optimizer", "%s", o->optimizer);
    add(&fs, "--momentum", "%.17g", o->momentum);
    add(&fs, "--nesterov", "%d", o->nesterov);
    add(&fs, "--weight-decay", "%.17g", o->weight_decay);
    add(&fs, "--schedule", "%s", o->schedule);
    add(&fs, "--warmup-steps", "%ld", o->warmup_steps);
    add(&fs, "--min-lr", "%.17g", o->min_lr);
    add(&fs, "--seed", "%llu", (unsigned long long)o->seed);
    add(&fs, "--train-limit", "%ld", o->train_limit);
    add(&fs, "--test-limit", "%ld", o->test_limit);
    add(&fs, "--max-steps", "%ld", o->max_steps);
    add(&fs, "--accum-steps", "%d", o->accum_steps);
    add(&fs, "--clip-grad-norm", "%.17g", o->clip_grad_norm);
    add(&fs, "--shuffle", "%d", o->shuffle);
    add(&fs, "--drop-last", "%d", o->drop_last);
    add(&fs, "--eval", "%d", o->eval);
    add(&fs, "--eval-every", "%ld", o->eval_every);
    /* the sample is generated on rank 0 from parameters every rank gathers */
    add(&fs, "--sample-length", "%d", o->sample_length);
    /* collective outputs: the path is rank 0's (or the same shared directory);
     * whether it is given decides the collectives every rank takes part in */
    add(&fs, "--save-model", "%s", *o->save_model ? "given" : "not given");
    add(&fs, "--save-format", "%s", o->save_format);
    add(&fs, "--init-from", "%s", *o->init_from ? "given" : "not given");
    add(&fs, "--vocab-size", "%d", o->vocab_size);
    add(&fs, "--checkpoint-dir", "%s", *o->checkpoint_dir ? "given" : "not given");
    add(&fs, "--checkpoint-every", "%ld", o->checkpoint_every);
    add(&fs, "--resume", "%s", *o->resume_dir ? "given" : "not given");
    add_config(&fs, &o->dist);
    return agree(t, &fs, "ranks were started with different training flags or config",
                 "start every rank with the same flags, --config file and DTRAIN_* environment");
}

int dt_trainer_check_data(dt_trainer *t) {
    fields fs;
    fs.n = 0;
    add(&fs, "training samples", "%lld", (long long)t->src->ops->train_count(t->src));
    add(&fs, "test samples", "%lld", (long long)t->src->ops->eval_count(t->src));
    return agree(t, &fs, "ranks loaded different data sets (--data)",
                 "give every rank the same data set (the directory may differ, the files may not)");
}

int dt_trainer_check_resumed(dt_trainer *t) {
    uint64_t epoch, pos;
    dt_trainer_position(t, &epoch, &pos);
    fields fs;
    fs.n = 0;
    add(&fs, "step", "%ld", t->step);
    add(&fs, "epoch", "%llu", (unsigned long long)epoch);
    add(&fs, "sample", "%llu", (unsigned long long)pos);
    return agree(t, &fs, "ranks resumed from different checkpoints (--resume)",
                 "give every rank the same checkpoint directory");
}

/* ---- output paths -------------------------------------------------------------- */

/* This rank's timeline file: every "%d" in the flag becomes the world rank;
 * without one, rank r > 0 writes FILE.r. */
static void timeline_path(const dt_trainer *t, char *out, size_t cap) {
    const char *f = t->o.timeline_path;
    size_t n = 0;
    int subst = 0;
    for (const char *p = f; *p && n + 1 < cap; p++) {
        if (p[0] == '%' && p[1] == 'd') {
            n += (size_t)snprintf(out + n, cap - n, "%d", t->ci.world_rank);
            if (n >= cap) n = cap - 1;
            subst = 1;
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    if (!subst && t->ci.world_rank != 0) {
        size_t k = strlen(out);
        snprintf(out + k, cap - k, ".%d", t->ci.world_rank);
    }
}

int dt_trainer_check_outputs(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    int rc = DT_OK;
    if (t->ci.rank == 0) {
        if (!rc && *o->checkpoint_dir) rc = dt_ckpt_prepare(o->checkpoint_dir, NULL);
        if (!rc && *o->save_model)
            rc = strcmp(o->save_format, "hf") == 0 ? dt_trainer_check_hf_dir(o->save_model)
                                                   : dt_st_writer_check(o->save_model);
        if (!rc && (*o->json_path || *o->tensorboard_dir))
            rc = dt_metrics_open(&t->metrics, o->json_path, o->tensorboard_dir);
    }
    if (!rc && *o->timeline_path) {
        char path[320];
        timeline_path(t, path, sizeof path);
        rc = dt_trace_open(path, t->ci.world_rank);
        t->tracing = rc == DT_OK;
    }
    return dt_trainer_agree_error(t, rc);
}
