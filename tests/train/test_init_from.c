/* tests/train/test_init_from.c - the trainer's --init-from (dtrain/train.h,
 * INIT FROM) at any world size and ZeRO stage, on llm.c token shards.
 *
 * Rank 0 writes a Hugging Face GPT-2 checkpoint (GPT2Model's unprefixed
 * names, Conv1D matrices [in, out], the attn.bias buffers, config.json with
 * n_head) of a dtrain model with GPT-2's vocabulary of 50257, and llm.c
 * token shards (fineweb's naming: a val and two train shards). Then:
 *  - loaded at this world size under ZeRO stages 0-3 (--max-steps 0), the
 *    gathered parameters are the file's, bit for bit, and the evaluation
 *    (split across the ranks) equals the one-rank evaluation;
 *  - 6 AdamW steps from the loaded model at N ranks (batch 8/N) equal 6
 *    steps of one rank with batch 8 within 1e-5 (max|a - b| / max|b|), at
 *    stages 0 and 3;
 *  - --save-format llmc / llmc-bf16 at N ranks under ZeRO-3, read back by
 *    --init-from at N ranks: the parameters bit for bit / bf16-rounded,
 *    and the file's size llm.c's;
 *  - --dp-threads 2 (one rank) loads the same parameters;
 *  - the end-of-run sample of the 50257-token vocabulary runs (its prompt
 *    is the last token, GPT-2's <|endoftext|>).
 * The one-rank references run on every rank over a standalone communicator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "dtrain/coll.h"
#include "dtrain/dtype.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"
#include "dtrain/train.h"
#include "testutil.h"

#define B 8
#define STEPS 6
#define VOCAB 50257

static char g_dir[200];

static dt_model *source_model(void) {
    dt_model_config c;
    dt_model_config_default(&c, "gpt");
    c.n_layer = 2, c.n_head = 4, c.n_embd = 16, c.block_size = 16, c.vocab_size = VOCAB, c.seed = 11;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&c, &m));
    return m;
}

static int is_conv1d(const char *n) {
    return strstr(n, "c_attn.weight") || strstr(n, "attn.c_proj.weight") || strstr(n, "c_fc.weight") ||
           strstr(n, "mlp.c_proj.weight");
}

/* rank 0: the checkpoint and the shards under g_dir */
static int write_inputs(dt_model *m) {
    const int n = dt_model_num_slices(m);
    dt_st_info ts[40];
    float *bufs[40];
    char names[40][64];
    int k = 0;
    for (int i = 0; i < n; i++, k++) {
        const dt_param_slice *sl = dt_model_slice(m, i);
        const int tr = sl->ndim == 2 && is_conv1d(sl->name);
        snprintf(names[k], sizeof names[k], "%s", sl->name + strlen("transformer."));
        ts[k] = (dt_st_info){.name = names[k], .dtype = DT_F32, .ndim = sl->ndim,
                             .shape = {tr ? sl->shape[1] : sl->shape[0], tr ? sl->shape[0] : sl->shape[1]}};
        float *b = bufs[k] = malloc(sl->count * sizeof(float));
        const size_t r = (size_t)sl->shape[0], c = sl->ndim == 2 ? (size_t)sl->shape[1] : 1;
        for (size_t e = 0; e < sl->count; e++) b[tr ? (e % c) * r + e / c : e] = dt_model_params(m)[sl->offset + e];
        ts[k].data = b;
    }
    for (int l = 0; l < 2; l++, k++) { /* HF's causal mask buffers, ignored */
        snprintf(names[k], sizeof names[k], "h.%d.attn.bias", l);
        bufs[k] = calloc(16 * 16, sizeof(float));
        ts[k] = (dt_st_info){.name = names[k], .dtype = DT_F32, .ndim = 4, .shape = {1, 1, 16, 16}, .data = bufs[k]};
    }
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
    int rc = dt_st_save(p, ts, k, "{\"format\":\"pt\"}");
    for (int i = 0; i < k; i++) free(bufs[i]);
    snprintf(p, sizeof p, "%s/config.json", g_dir);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("{\"model_type\": \"gpt2\", \"n_head\": 4, \"n_layer\": 2, \"n_embd\": 16, \"n_positions\": 16, "
              "\"vocab_size\": 50257, \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-05}\n", f);
        fclose(f);
    }
    /* shards: tokens of a pseudo-random walk over the vocabulary */
    snprintf(p, sizeof p, "%s/shards", g_dir);
    mkdir(p, 0755);
    const char *sh[] = {"fw_val_000000.bin", "fw_train_000001.bin", "fw_train_000002.bin"};
    const int len[] = {400, 1500, 1200};
    uint32_t x = 12345;
    for (int s = 0; s < 3; s++) {
        snprintf(p, sizeof p, "%s/shards/%s", g_dir, sh[s]);
        f = fopen(p, "wb");
        if (!f) return -1;
        int32_t h[256] = {20240520, 1, len[s]};
        fwrite(h, sizeof h, 1, f);
        for (int i = 0; i < len[s]; i++) {
            x = x * 1664525u + 1013904223u;
            uint16_t t = (uint16_t)((x >> 8) % VOCAB);
            fwrite(&t, 2, 1, f);
        }
        fclose(f);
    }
    return rc;
}

static void options(dt_train_options *o, dt_comm *comm, int zero, int batch, long steps) {
    dt_train_options_default(o);
    snprintf(o->model, sizeof o->model, "gpt");
    snprintf(o->init_from, sizeof o->init_from, "%s/model.safetensors", g_dir);
    snprintf(o->data_dir, sizeof o->data_dir, "%s/shards", g_dir);
    snprintf(o->optimizer, sizeof o->optimizer, "adamw");
    o->lr = 2e-3;
    o->batch_size = batch;
    o->epochs = 1;
    o->max_steps = steps;
    o->test_limit = 12;
    o->quiet = 1;
    o->sample_length = 0;
    o->seed = 3;
    o->comm = comm;
    o->dist.zero_opt_level = zero;
    o->dist.bucket_size_mb = 0.5;
}

/* The parameters after the run, on every rank (NULL on failure); *loss the evaluation. */
static float *run(dt_train_options *o, double *loss, size_t *n) {
    dt_trainer *t = NULL;
    dt_train_result r;
    int rc = dt_trainer_create(o, &t);
    if (!rc) rc = dt_trainer_fit(t, &r);
    float *p = NULL;
    if (!rc) {
        *loss = r.test_loss;
        *n = dt_model_num_params(dt_trainer_model(t));
        p = malloc(*n * sizeof(float));
        const int root = dt_comm_world_rank_of(o->comm ? o->comm : dt_comm_world(), 0);
        rc = dt_trainer_gather_params(t, p, root);
        if (!rc) rc = dt_broadcast(p, p, *n, DT_F32, root, o->comm ? o->comm : dt_comm_world());
    }
    if (rc) {
        CHECK_OK(rc);
        free(p);
        p = NULL;
    }
    dt_trainer_free(t);
    return p;
}

int main(void) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    const int N = dt_comm_size(w), rank = dt_comm_rank(w);
    dt_test_rank = rank;
    if (B % N != 0) {
        printf("SKIP: batch %d does not split into %d ranks\n", B, N);
        return 77;
    }
    dt_comm *solo = dt_test_solo_comm();
    /* rank 0's temporary directory, on every rank */
    char dir[256] = "";
    if (rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/dt_initfrom_XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) dir[0] = '\0';
    }
    CHECK_OK(dt_broadcast(dir, dir, sizeof dir, DT_U8, 0, w));
    snprintf(g_dir, sizeof g_dir, "%.199s", dir);
    dt_model *src = source_model();
    int wrc = rank == 0 && src ? write_inputs(src) : 0;
    CHECK_OK(dt_broadcast(&wrc, &wrc, 1, DT_I32, 0, w));
    CHECK(*g_dir && wrc == 0, "inputs written (%d)", wrc);
    const size_t P = dt_model_num_params(src);

    /* loading at N ranks, every stage: the file's parameters, the same evaluation */
    dt_train_options o;
    double l1 = NAN, ln = NAN;
    size_t n = 0;
    options(&o, solo, 0, B, 0);
    float *p1 = run(&o, &l1, &n);
    const double eval16 = l1; /* the loaded model's evaluation at its 16 positions */
    CHECK(p1 && n == P && memcmp(p1, dt_model_params(src), P * sizeof(float)) == 0,
          "one rank: the file's parameters, bit for bit");
    for (int zero = 0; zero <= 3; zero++) {
        options(&o, w, zero, B / N, 0);
        float *p = run(&o, &ln, &n);
        CHECK(p && n == P && memcmp(p, dt_model_params(src), P * sizeof(float)) == 0,
              "%d ranks, ZeRO stage %d: the file's parameters, bit for bit", N, zero);
        CHECK(fabs(ln - l1) <= 1e-9 * l1, "%d ranks, stage %d: evaluation %.9g, one rank %.9g", N, zero, ln, l1);
        if (rank == 0)
            printf("loaded at %d rank(s), ZeRO stage %d: parameters %s, validation loss %.7f (one rank %.7f; "
                   "ln(50257) = %.4f)\n", N, zero, p && !memcmp(p, p1, P * sizeof(float)) ? "identical" : "DIFFER",
                   ln, l1, log(50257.0));
        free(p);
    }
    /* training from the loaded model: N ranks equal one */
    options(&o, solo, 0, B, STEPS);
    float *ref = run(&o, &l1, &n);
    CHECK(ref && memcmp(ref, dt_model_params(src), P * sizeof(float)) != 0, "the steps change the parameters");
    for (int zero = 0; zero <= 3; zero += 3) {
        if (N == 1 && zero == 0) continue; /* the reference itself */
        options(&o, w, zero, B / N, STEPS);
        float *p = run(&o, &ln, &n);
        double e = p && ref ? dt_test_rel_err(p, ref, P) : -1;
        if (rank == 0) printf("%d steps from the loaded model, %d ranks, ZeRO stage %d: rel err %.3g\n", STEPS, N, zero, e);
        CHECK(e >= 0 && e <= 1e-5, "stage %d at %d ranks: rel err %.3g > 1e-5", zero, N, e);
        free(p);
    }
    /* llm.c's model file: written at N ranks under ZeRO-3 (gathered tensor
     * by tensor), read back at N ranks: float32 bit for bit, bfloat16 the
     * rounded values */
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        char bin[240];
        snprintf(bin, sizeof bin, "%.200s/trained%s.bin", g_dir, bf16 ? "_bf16" : "");
        options(&o, w, 3, B / N, STEPS);
        snprintf(o.save_format, sizeof o.save_format, "%s", bf16 ? "llmc-bf16" : "llmc");
        snprintf(o.save_model, sizeof o.save_model, "%s", bin);
        float *trained = run(&o, &ln, &n);
        options(&o, w, 0, B / N, 0);
        snprintf(o.init_from, sizeof o.init_from, "%s", bin);
        float *back = run(&o, &ln, &n);
        int same = trained && back && n == P;
        for (size_t i = 0; same && i < P; i++)
            same = back[i] == (bf16 ? dt_bf16_to_f32(dt_f32_to_bf16(trained[i])) : trained[i]);
        CHECK(same, "--save-format %s at %d ranks, ZeRO-3, read back by --init-from: %s", bf16 ? "llmc-bf16" : "llmc",
              N, bf16 ? "the rounded parameters" : "the parameters bit for bit");
        struct stat st;
        const long long C = 16, Vp = (VOCAB + 127) / 128 * 128, bytes = 1024 + (bf16 ? 2 : 4) *
            (Vp * C + 16 * C + 2 * C + 2 * (12 * C * C + 13 * C));
        CHECK(stat(bin, &st) == 0 && st.st_size == bytes, "%s: %lld bytes, llm.c's size %lld", bin,
              (long long)st.st_size, bytes);
        free(trained);
        free(back);
    }
    /* --seq-len 8 (windows of half the file's 16 positions): the file's
     * parameters, an evaluation of its own (N ranks equal one); 17 is refused */
    double s1 = NAN, sn = NAN;
    options(&o, solo, 0, B, 0);
    o.seq_len = 8;
    float *q1 = run(&o, &s1, &n);
    options(&o, w, 3, B / N, 0);
    o.seq_len = 8;
    float *qn = run(&o, &sn, &n);
    CHECK(q1 && qn && memcmp(qn, dt_model_params(src), P * sizeof(float)) == 0, "--seq-len 8: the file's parameters");
    /* float32 rows (the GEMMs block a batch of B / N differently), summed in float64 */
    CHECK(isfinite(s1) && fabs(sn - s1) <= 1e-6 * s1 && s1 != eval16,
          "--seq-len 8: evaluation %.15g at %d ranks, %.15g at one (%.15g at 16)", sn, N, s1, eval16);
    free(q1);
    free(qn);
    options(&o, w, 0, B / N, 0);
    o.seq_len = 17;
    dt_trainer *t = NULL;
    CHECK_ERR(dt_trainer_create(&o, &t), DT_ERR_INVALID, "flag --seq-len 17:");
    CHECK(strstr(dt_last_error(), "has 16 positions") != NULL, "the file's positions: %s", dt_last_error());
    dt_trainer_free(t);
    /* data-parallel threads load the same; the sample of a 50257-token vocabulary */
    if (N == 1) {
        options(&o, w, 0, B, 0);
        o.dp_threads = 2;
        o.sample_length = 5;
        o.sample_temperature = 0;
        float *p = run(&o, &ln, &n);
        CHECK(p && memcmp(p, dt_model_params(src), P * sizeof(float)) == 0, "--dp-threads 2: the file's parameters");
        free(p);
    }
    free(p1);
    free(ref);
    dt_model_free(src);
    CHECK_OK(dt_barrier(w));
    if (rank == 0 && *g_dir) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("train_init_from");
}
