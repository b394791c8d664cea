/* src/train/train_ckpt.c - the trainer's checkpoints: consolidated model
 * export (safetensors, dtrain's names or Hugging Face's directory; llm.c's
 * model file) and
 * sharded training-state checkpoints (dtrain/ckpt.h) with resume at any
 * world size and ZeRO level. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "core/device.h"
#include "core/error.h"
#include "dtrain/ckpt.h"
#include "dtrain/coll.h"
#include "dtrain/dtype.h"
#include "dtrain/safetensors.h"
#include "dtrain/weights.h"
#include "io/fileio.h"
#include "train/trainer_internal.h"

/* rank 0's status and *val (may be NULL), shared with every rank (so all take
 * the same path) */
static int agree_val(dt_trainer *t, int rc, uint64_t *val) {
    int64_t v[3] = {rc, rc < 0 ? 1 : 0, val ? (int64_t)*val : 0};
    int brc = dt_broadcast(v, v, 3, DT_I64, dt_comm_world_rank_of(t->comm, 0), t->comm);
    if (brc) return brc;
    if (val) *val = (uint64_t)v[2];
    if (t->ci.rank != 0 && v[1]) return DT_ERR((int)v[0], "rank 0 failed (see its message)");
    return (int)v[0];
}

static int agree(dt_trainer *t, int rc) { return agree_val(t, rc, NULL); }

/* any rank's failure, on every rank */
static int agree_all(dt_trainer *t, int rc) {
    int v = rc < 0 ? 1 : 0;
    int brc = t->ci.size > 1 ? dt_allreduce(&v, &v, 1, DT_I32, DT_MAX, t->comm) : DT_OK;
    if (brc) return brc;
    if (v && !rc) return DT_ERR(DT_ERR_IO, "another rank failed (see its message)");
    return rc;
}

/* ---- the model's memory as the files see it ------------------------------------ */

/* n floats at p in host memory: p itself, or (device memory: a device model's
 * parameters, gradients, optimizer state) a host copy in *tmp, which the
 * caller frees. */
static int host_view(dt_trainer *t, const float *p, size_t n, const float **out, float **tmp) {
    int dev, is = n ? dt_dev_is_device(p, &dev) : 0;
    *tmp = NULL;
    *out = p;
    if (is <= 0) return is;
    if (!(*tmp = malloc(n * sizeof(float))))
        return DT_ERR(DT_ERR_NOMEM, "out of memory for a host copy of %zu device values", n);
    *out = *tmp;
    return dt_model_copy_to_host(t->model, *tmp, p, n);
}

/* ---- consolidated model ---------------------------------------------------- */

/* A file that appears whole or not at all (the safetensors writer's promise,
 * for config.json and llm.c's model file): atomic_create opens the
 * temporary "<path>.tmp.<pid>" (its name in tmp) for writing; atomic_finish
 * ends it: with rc == 0 fsync, close, rename into place and fsync of the
 * directory, else close and remove the temporary. Returns rc or the first
 * failure. */
static int atomic_create(const char *path, char *tmp, size_t cap, int *fd) {
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    *fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return *fd < 0 ? DT_ERR(DT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)) : DT_OK;
}

static int atomic_finish(int fd, const char *tmp, const char *path, int rc) {
    if (!rc && fsync(fd)) rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) && !rc) rc = DT_ERR(DT_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path)) rc = DT_ERR(DT_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (rc) unlink(tmp);
    else if (dtio_fsync_dir_of(path, 0)) rc = DT_ERR(DT_ERR_IO, "%s: fsync of the directory: %s", path, strerror(errno));
    return rc;
}

/* text into path atomically */
static int write_text_atomic(const char *path, const char *text) {
    char tmp[600];
    int fd, rc = atomic_create(path, tmp, sizeof tmp, &fd);
    if (rc) return rc;
    if (dtio_write_all(fd, text, strlen(text))) rc = DT_ERR(DT_ERR_IO, "%s: %s", tmp, strerror(errno));
    return atomic_finish(fd, tmp, path, rc);
}

/* The model's safetensors header: its names and shapes (Hugging Face's for
 * hf), whether each tensor is written transposed, the largest parameter
 * slice, and the metadata (the gpt sizes, so that --init-from needs no flag). */
static int export_layout(dt_trainer *t, int hf, dt_st_info *info, int *transpose, char (*names)[DT_SLICE_NAME_MAX],
                         size_t *maxc, char *meta, size_t cap) {
    const int np = dt_model_num_slices(t->model), nb = dt_model_num_buffer_slices(t->model);
    int rc = DT_OK;
    for (int i = 0; i < np + nb && !rc; i++) {
        const dt_param_slice *sl = i < np ? dt_model_slice(t->model, i) : dt_model_buffer_slice(t->model, i - np);
        info[i].name = sl->name;
        info[i].dtype = DT_F32;
        info[i].ndim = sl->ndim;
        for (int d = 0; d < sl->ndim; d++) info[i].shape[d] = sl->shape[d];
        if (hf && !(rc = dt_weights_hf_tensor(sl, names[i], DT_SLICE_NAME_MAX, info[i].shape, &transpose[i])))
            info[i].name = names[i];
        if (i < np && sl->count > *maxc) *maxc = sl->count;
    }
    char step[32], mk[DT_TRAIN_META_MAX][16], mv[DT_TRAIN_META_MAX][24];
    snprintf(step, sizeof step, "%ld", t->step);
    json_t *mj = json_pack("{s:s, s:s, s:s, s:s}", "format", "pt", "model", dt_model_name(t->model), "written_by",
                           "dtrain", "step", step);
    for (int i = 0, nk = dt_trainer_model_meta(t, mk, mv); mj && i < nk; i++)
        if (t->io.max_seq > 0) json_object_set_new(mj, mk[i], json_string(mv[i]));
    size_t ml = mj ? json_dumpb(mj, meta, cap - 1, 0) : 0;
    json_decref(mj);
    if (!ml || ml >= cap) return rc ? rc : DT_ERR(DT_ERR_NOMEM, "safetensors metadata: out of memory");
    meta[ml] = '\0';
    return rc;
}

/* [r, c] -> [c, r] */
static void transpose_into(const float *src, size_t r, size_t c, float *dst) {
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) dst[j * r + i] = src[i * c + j];
}

/* n floats of src into dst in the file's dtype, then zeros up to `stored` elements */
static void llmc_pack(const float *src, size_t n, uint64_t stored, int bf16, unsigned char *dst) {
    if (bf16) {
        uint16_t *d = (uint16_t *)dst;
        for (size_t i = 0; i < n; i++) d[i] = dt_f32_to_bf16(src[i]);
        memset(d + n, 0, (size_t)(stored - n) * 2);
    } else {
        memcpy(dst, src, n * sizeof(float));
        memset(dst + n * sizeof(float), 0, (size_t)(stored - n) * sizeof(float));
    }
}

/* --save-format llmc / llmc-bf16: llm.c's model file (dtrain/weights.h), one
 * gathered tensor at a time into a temporary beside path (rank 0), fsync'd
 * and renamed into place */
static int save_llmc(dt_trainer *t, const char *path, int bf16) {
    const int root = dt_comm_world_rank_of(t->comm, 0), me = t->ci.rank == 0, np = dt_model_num_slices(t->model);
    const size_t es = bf16 ? 2 : 4;
    const dt_model_config *cfg = dt_model_get_config(t->model);
    unsigned char head[DT_WEIGHTS_LLMC_HEADER_BYTES];
    uint64_t total = 0, maxs = 0, *off = calloc((size_t)np, sizeof *off), *stored = calloc((size_t)np, sizeof *stored);
    size_t maxc = 0;
    int rc = off && stored ? dt_weights_llmc_header(cfg, bf16, head, &total) : DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < np && !rc; i++) { /* where each slice goes, once */
        const dt_param_slice *sl = dt_model_slice(t->model, i);
        rc = dt_weights_llmc_place(cfg, bf16, sl, &off[i], &stored[i]);
        if (sl->count > maxc) maxc = sl->count;
        if (stored[i] > maxs) maxs = stored[i];
    }
    char tmp[600];
    int fd = -1;
    if (me && !rc && !(rc = atomic_create(path, tmp, sizeof tmp, &fd)) &&
        (dtio_pwrite_all(fd, head, sizeof head, 0) || ftruncate(fd, (off_t)total)))
        rc = DT_ERR(DT_ERR_IO, "%s: %s", tmp, strerror(errno));
    rc = agree(t, rc);
    float *buf = rc ? NULL : malloc(sizeof(float) * (maxc ? maxc : 1));
    unsigned char *out = rc || !me ? NULL : malloc((size_t)maxs * es + 1);
    if (!rc && (!buf || (me && !out))) rc = DT_ERR(DT_ERR_NOMEM, "out of memory");
    rc = agree_all(t, rc);
    int wrc = DT_OK;
    for (int i = 0; i < np && !rc; i++) {
        const dt_param_slice *sl = dt_model_slice(t->model, i);
        rc = dt_strategy_gather(t->st, sl->offset, sl->count, buf, root);
        if (rc || !me || wrc) continue;
        llmc_pack(buf, sl->count, stored[i], bf16, out);
        if (dtio_pwrite_all(fd, out, (size_t)stored[i] * es, off[i]))
            wrc = DT_ERR(DT_ERR_IO, "%s: %s", tmp, strerror(errno));
    }
    if (fd >= 0) {
        const int frc = atomic_finish(fd, tmp, path, rc ? rc : wrc);
        if (!rc) wrc = frc;
    }
    free(buf);
    free(out);
    free(off);
    free(stored);
    if (rc) return rc;
    return agree(t, wrc);
}

int dt_trainer_save_model(dt_trainer *t, const char *path) {
    if (!t || !path || !*path) return DT_ERR(DT_ERR_INVALID, "trainer or path is NULL/empty");
    if (strncmp(t->o.save_format, "llmc", 4) == 0) {
        if (t->io.max_seq < 1)
            return DT_ERR(DT_ERR_INVALID, "save_format %s: llm.c's layout is GPT-2's, not model %s's", t->o.save_format,
                          dt_model_name(t->model));
        return save_llmc(t, path, strcmp(t->o.save_format, "llmc-bf16") == 0);
    }
    const int hf = strcmp(t->o.save_format, "hf") == 0;
    if (hf && t->io.max_seq < 1)
        return DT_ERR(DT_ERR_INVALID, "save_format hf: the Hugging Face layout is GPT-2's, not model %s's",
                      dt_model_name(t->model));
    int root = dt_comm_world_rank_of(t->comm, 0), me = t->ci.rank == 0;
    int np = dt_model_num_slices(t->model), nb = dt_model_num_buffer_slices(t->model), n = np + nb;
    dt_st_info *info = calloc((size_t)n, sizeof *info);
    int *transpose = calloc((size_t)n, sizeof *transpose);
    char(*names)[DT_SLICE_NAME_MAX] = calloc((size_t)n, sizeof *names);
    char *file = hf ? dtio_join(path, "model.safetensors") : dtio_cat(path, "");
    size_t maxc = 0;
    char meta[1024];
    int rc = info && transpose && names && file ? DT_OK : DT_ERR(DT_ERR_NOMEM, "out of memory");
    if (!rc) rc = export_layout(t, hf, info, transpose, names, &maxc, meta, sizeof meta);
    dt_st_writer *w = NULL;
    if (me && !rc) rc = dt_st_writer_open(file, info, n, meta, &w);
    rc = agree(t, rc);
    /* one tensor at a time: ZeRO-3 never holds the whole model on rank 0 */
    float *buf = rc ? NULL : malloc(sizeof(float) * (maxc ? maxc : 1));
    float *tbuf = rc || !hf || !me ? NULL : malloc(sizeof(float) * (maxc ? maxc : 1));
    if (!rc && (!buf || (hf && me && !tbuf))) rc = DT_ERR(DT_ERR_NOMEM, "out of memory");
    rc = agree_all(t, rc);
    int wrc = DT_OK;
    for (int i = 0; i < np && !rc; i++) {
        const dt_param_slice *sl = dt_model_slice(t->model, i);
        rc = dt_strategy_gather(t->st, sl->offset, sl->count, buf, root);
        if (!rc && me && !wrc && transpose[i]) transpose_into(buf, (size_t)sl->shape[0], (size_t)sl->shape[1], tbuf);
        if (!rc && me && !wrc) wrc = dt_st_writer_write(w, i, transpose[i] ? tbuf : buf);
    }
    for (int i = 0; i < nb && !rc && me && !wrc; i++) { /* buffers are identical on every rank */
        const dt_param_slice *sl = dt_model_buffer_slice(t->model, i);
        const float *v;
        float *tmp;
        wrc = host_view(t, dt_model_buffers(t->model) + sl->offset, sl->count, &v, &tmp);
        if (!wrc) wrc = dt_st_writer_write(w, np + i, v);
        free(tmp);
    }
    if (me && w) {
        if (!rc && !wrc) wrc = dt_st_writer_close(w);
        else dt_st_writer_abort(w);
    }
    if (hf && me && !rc && !wrc) { /* the config last: a directory with one is complete */
        char *cfg = NULL, *cpath = dtio_join(path, "config.json");
        wrc = cpath ? dt_weights_hf_config(dt_model_get_config(t->model), &cfg) : DT_ERR(DT_ERR_NOMEM, "out of memory");
        if (!wrc) wrc = write_text_atomic(cpath, cfg);
        free(cfg);
        free(cpath);
    }
    free(buf);
    free(tbuf);
    free(info);
    free(transpose);
    free(names);
    free(file);
    if (rc) return rc;
    return agree(t, wrc);
}

/* --save-format hf: the directory (created if missing) can take
 * model.safetensors and config.json (rank 0, before training) */
int dt_trainer_check_hf_dir(const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT || mkdir(dir, 0755) != 0)
            return DT_ERR(DT_ERR_IO, "--save-model %s (--save-format hf: a directory): %s", dir, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        return DT_ERR(DT_ERR_INVALID, "--save-model %s: --save-format hf writes a directory (model.safetensors and "
                      "config.json), and this is not one", dir);
    }
    char *f = dtio_join(dir, "model.safetensors"), *c = dtio_join(dir, "config.json");
    int rc = f && c ? dt_st_writer_check(f) : DT_ERR(DT_ERR_NOMEM, "out of memory");
    if (!rc) rc = dt_st_writer_check(c);
    free(f);
    free(c);
    return rc;
}

/* ---- training-state checkpoints ---------------------------------------------- */

int dt_trainer_save_checkpoint(dt_trainer *t, const char *dir) {
    if (!t || !dir || !*dir) return DT_ERR(DT_ERR_INVALID, "trainer or directory is NULL/empty");
    size_t P = dt_model_num_params(t->model), NB = dt_model_num_buffers(t->model);
    int N = t->ci.size, r = t->ci.rank, zero = t->o.dist.zero_opt_level, rc = DT_OK;
    /* what this rank holds, and the part it writes (every strategy writes the
     * ZeRO partition [r*S, (r+1)*S), so a checkpoint has the same layout
     * whatever wrote it; with shard_group host each of a shard's replicas
     * writes one part of that host shard: parts of about P/N all the same,
     * and any layout reads any other, dt_ckpt_read_range stitching them) */
    dt_strategy_state ss;
    if ((rc = dt_strategy_state_get(t->st, &ss))) return rc;
    int ns = dt_optim_num_states(ss.opt);
    size_t lo = ss.save_lo, hi = ss.save_hi, at = ss.save_lo - ss.lo;
    /* rank 0 checks the directory and picks the generation every rank writes */
    uint64_t gen = 0;
    if (r == 0) rc = dt_ckpt_prepare(dir, &gen);
    rc = agree_val(t, rc, &gen);
    if (rc) return rc;

    /* what this rank writes, in host memory (a device model's: copied) */
    dt_ckpt_range ranges[8];
    float *tmp[8] = {0};
    int nr = 0;
    const char *names[6];
    const float *v;
    rc = host_view(t, ss.params + at, hi - lo, &v, &tmp[nr]);
    ranges[nr++] = (dt_ckpt_range){"params", lo, hi - lo, v};
    for (int i = 0; !rc && i < ns && i < 5; i++) {
        float *st = dt_optim_state(ss.opt, i, &names[i]);
        rc = host_view(t, st + at, hi - lo, &v, &tmp[nr]);
        ranges[nr++] = (dt_ckpt_range){names[i], lo, hi - lo, v};
    }
    if (!rc && r == 0 && NB) {
        rc = host_view(t, dt_model_buffers(t->model), NB, &v, &tmp[nr]);
        ranges[nr++] = (dt_ckpt_range){"buffers", 0, NB, v};
    }
    dt_ckpt_shard shard = {nr, ranges};
    if (!rc) rc = dt_ckpt_write_shard(dir, gen, r, &shard, NULL);
    for (int i = 0; i < nr; i++) free(tmp[i]);
    rc = agree_all(t, rc);
    if (rc) return rc;

    if (r == 0) {
        dt_ckpt_vector vec[8];
        int nv = 0;
        vec[nv++] = (dt_ckpt_vector){"params", P};
        for (int i = 0; i < ns && i < 5; i++) vec[nv++] = (dt_ckpt_vector){names[i], P};
        if (NB) vec[nv++] = (dt_ckpt_vector){"buffers", NB};
        char dist[1024], bs[16], mk[DT_TRAIN_META_MAX][16], mv[DT_TRAIN_META_MAX][24];
        dt_config_to_json(&t->o.dist, dist, sizeof dist);
        snprintf(bs, sizeof bs, "%d", t->o.batch_size);
        uint64_t epoch, pos;
        dt_trainer_position(t, &epoch, &pos);
        /* the position is in samples of the epoch's global order: any layout
         * (world size, batch size, accumulation) resumes exactly there */
        dt_ckpt_kv meta[16] = {{"model", t->o.model}, {"optimizer", t->o.optimizer}, {"dist_config", dist},
                               {"written_by", "dtrain-train"}, {"epoch_position_unit", "samples"},
                               {"batch_size", bs}};
        int nm = 6, nk = dt_trainer_model_meta(t, mk, mv);
        for (int i = 0; i < nk; i++) meta[nm++] = (dt_ckpt_kv){mk[i], mv[i]};
        dt_ckpt_manifest m = {.generation = gen, .step = (uint64_t)t->step, .epoch = epoch,
                              .epoch_position = pos,
                              .rng_state = {t->o.seed, 0, 0, 0}, .world_size = N, .zero_level = zero,
                              .num_params = P, .num_buffers = NB, .nvectors = nv, .vectors = vec,
                              .nranks = 0, .nmeta = nm, .meta = meta};
        rc = dt_ckpt_commit(dir, &m);
    }
    return agree(t, rc);
}

/* a checkpoint of another model or size does not fit the flags: exit 2 */
static int check_meta(dt_ckpt_manifest *m, const char *dir, const char *key, const char *want) {
    const char *got = dt_ckpt_meta_get(m, key);
    if (!got || strcmp(got, want) != 0)
        return dt_trainer_mark_input(DT_ERR(DT_ERR_MISMATCH, "checkpoint '%s' was written for %s '%s', this run "
                                            "uses '%s'", dir, key, got ? got : "(none)", want));
    return DT_OK;
}

/* dt_strategy_read_fn over a loaded manifest */
typedef struct reader {
    dt_trainer *t;
    dt_ckpt_manifest *m;
    const char *dir;
} reader;

/* a range of a checkpoint's vector into dst: host memory, or the device
 * memory of a device model (through a host copy) */
static int read_into(reader *rd, const char *vector, size_t offset, size_t count, float *dst) {
    int dev, is = count ? dt_dev_is_device(dst, &dev) : 0;
    if (is < 0) return is;
    if (!is) return dt_ckpt_read_range(NULL, rd->m, vector, offset, count, dst);
    float *h = malloc(count * sizeof(float));
    if (!h) return DT_ERR(DT_ERR_NOMEM, "out of memory for %zu values of '%s'", count, vector);
    int rc = dt_ckpt_read_range(NULL, rd->m, vector, offset, count, h);
    if (!rc) rc = dt_model_copy_from_host(rd->t->model, dst, h, count); /* h may go on return */
    free(h);
    return rc;
}

static int read_vec(void *ctx, const char *vector, size_t offset, size_t count, float *dst) {
    reader *rd = ctx;
    if (strcmp(vector, "params") != 0 && dt_ckpt_vector_index(rd->m, vector) < 0)
        return DT_ERR(DT_ERR_MISMATCH, "checkpoint '%s' has no optimizer state '%s'", rd->dir, vector);
    return read_into(rd, vector, offset, count, dst);
}

int dt_trainer_resume(dt_trainer *t, const char *dir) {
    if (!t || !dir || !*dir) return DT_ERR(DT_ERR_INVALID, "trainer or directory is NULL/empty");
    dt_ckpt_manifest *m = NULL;
    size_t P = dt_model_num_params(t->model), NB = dt_model_num_buffers(t->model);
    char mk[DT_TRAIN_META_MAX][16], mv[DT_TRAIN_META_MAX][24];
    int nk = dt_trainer_model_meta(t, mk, mv);
    int rc = dt_ckpt_load_manifest(dir, &m);
    if (!rc) rc = check_meta(m, dir, "model", t->o.model);
    if (!rc) rc = check_meta(m, dir, "optimizer", t->o.optimizer);
    for (int i = 0; !rc && i < nk; i++) rc = check_meta(m, dir, mk[i], mv[i]);
    if (!rc && (m->num_params != P || m->num_buffers != NB))
        rc = dt_trainer_mark_input(DT_ERR(DT_ERR_MISMATCH, "checkpoint '%s' holds %llu parameters and %llu buffer "
                                          "values, the model has %zu and %zu", dir, (unsigned long long)m->num_params,
                                          (unsigned long long)m->num_buffers, P, NB));
    /* what this rank holds: the strategy reads its parameters (the full
     * vector, or its slice) and optimizer state from any layout */
    reader rd = {t, m, dir};
    if (!rc) rc = dt_strategy_load(t->st, read_vec, &rd);
    if (!rc && NB) rc = read_into(&rd, "buffers", 0, NB, dt_model_buffers(t->model));
    /* the position: samples of the epoch's global order; checkpoints of dtrain
     * before that (no "epoch_position_unit") counted micro-batches of B samples
     * on each of their world_size ranks, B being the batch size of this run
     * (exact when it is the one they were written with) */
    const char *unit = rc ? NULL : dt_ckpt_meta_get(m, "epoch_position_unit");
    if (!rc && unit && strcmp(unit, "samples") != 0)
        rc = DT_ERR(DT_ERR_UNSUPPORTED, "checkpoint '%s': epoch_position_unit '%.40s' (this build knows 'samples')", dir,
                    unit);
    if (!rc && m->epoch > (uint64_t)INT32_MAX)
        rc = DT_ERR(DT_ERR_IO, "checkpoint '%s': epoch %llu out of range", dir, (unsigned long long)m->epoch);
    if (!rc) {
        uint64_t pos = m->epoch_position;
        if (!unit) {
            uint64_t per = (uint64_t)t->o.batch_size * (uint64_t)m->world_size;
            pos = pos > UINT64_MAX / 4 / per ? UINT64_MAX / 4 : pos * per;
        }
        if (pos > (uint64_t)INT64_MAX / 4) pos = (uint64_t)INT64_MAX / 4; /* past any epoch's end */
        dt_strategy_state ss;
        rc = dt_strategy_state_get(t->st, &ss);
        if (!rc) rc = dt_optim_set_step(ss.opt, (long)m->step);
        t->step = (long)m->step;
        t->epoch = (int)m->epoch;
        t->resume_pos = (int64_t)pos;
        if (!rc && t->ci.rank == 0 && !t->o.quiet) {
            printf("resumed from %s: step %llu, epoch %llu, sample %llu of the epoch (a checkpoint of %d rank%s, ZeRO "
                   "stage %d)", dir, (unsigned long long)m->step, (unsigned long long)m->epoch + 1,
                   (unsigned long long)pos, m->world_size, m->world_size == 1 ? "" : "s", m->zero_level);
            if (!unit)
                printf("; its position was %llu micro-batch(es) per rank, taken as --batch-size %d (an older dtrain's "
                       "checkpoint: exact with the batch size it was written with)",
                       (unsigned long long)m->epoch_position, t->o.batch_size);
            printf("\n");
            fflush(stdout);
        }
    }
    dt_ckpt_manifest_free(m);
    return agree_all(t, rc);
}
