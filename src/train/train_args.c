/* src/train/train_args.c - trainer options: defaults and command-line flags. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/data.h"
#include "dtrain/model.h"
#include "dtrain/train.h"

void dt_train_options_default(dt_train_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    snprintf(o->model, sizeof o->model, "lenet");
    o->dropout = -1;
    o->epochs = 10;
    o->batch_size = 64;
    snprintf(o->optimizer, sizeof o->optimizer, "sgd");
    o->momentum = 0.9;
    o->weight_decay = -1;
    snprintf(o->schedule, sizeof o->schedule, "const");
    o->data_dir[0] = '\0'; /* the model family's data set */
    snprintf(o->sample_prompt, sizeof o->sample_prompt, "%s", DT_TRAIN_DEFAULT_PROMPT);
    o->sample_temperature = 0.8;
    o->sample_length = 200;
    o->max_steps = -1;
    snprintf(o->save_format, sizeof o->save_format, "dtrain");
    o->accum_steps = 1;
    o->threads = 1;
    o->dp_threads = 1;
    o->shuffle = 1;
    o->eval = 1;
    snprintf(o->device, sizeof o->device, "cpu");
    snprintf(o->precision, sizeof o->precision, "fp32");
    dt_config_default(&o->dist);
}

size_t dt_train_options_size(void) { return sizeof(dt_train_options); }
size_t dt_train_result_size(void) { return sizeof(dt_train_result); }

const char *dt_train_usage(void) {
    return
"usage: dtrain-train [flags]      (launch data parallel with: mpirun -np N dtrain-train ...)\n"
"  --model mlp|lenet|cnn|gpt  model (default lenet); classifiers train on Fashion-MNIST,\n"
"                             gpt (a GPT-2 language model) on text bytes or llm.c token shards\n"
"  --hidden1 N --hidden2 N    mlp: widths of fc1 and fc2 (default 1024 1024)\n"
"  --channels1 N --channels2 N  cnn: output channels of conv1 and conv2 (default 32 64)\n"
"  --dropout P                cnn dropout (default 0.25)\n"
"  --preset NAME              gpt sizes: gpt-test (2 layers x 64), gpt-demo (6 x 384, the\n"
"                             default), gpt2-124m (12 x 768); each overridable:\n"
"  --n-layer L --n-head H --n-embd C --block-size T\n"
"  --seq-len T                gpt: train and evaluate on windows of T tokens, T <= the block\n"
"                             size (default: the block size; a 1024-position model at 256)\n"
"  --vocab-size V             gpt vocabulary (default: the data's: 256 for bytes, 50257 for\n"
"                             token shards; with --init-from the file's)\n"
"  --init-from PATH           start from the weights of a safetensors file: dtrain's --save-model,\n"
"                             a PyTorch/nanoGPT state_dict or a Hugging Face GPT-2 model.safetensors\n"
"                             (its config.json beside it is read), a sharded checkpoint's\n"
"                             model.safetensors.index.json, or a folder holding either (as\n"
"                             save_pretrained writes); or llm.c's model file (gpt2_124M.bin,\n"
"                             float32 or bf16); gpt sizes from the file\n"
"  --recompute 0|1            gpt: keep only each block's input, recompute it in backward\n"
"  --device cpu|cuda          gpt: compute on the CPU (default) or on CUDA device\n"
"                             local_rank %% devices (model, activations, optimizer on it)\n"
"  --precision fp32|bf16      gpt on cuda: bf16 activations and compute weights, f32\n"
"                             master weights, gradients and optimizer (default fp32)\n"
"  --peak-tflops X            the device's peak TFLOP/s for the metrics' model FLOP\n"
"                             utilisation (default: known GPUs' peak; cpu: none)\n"
"  --sample-prompt TEXT       gpt: the end-of-run sample continues TEXT (default \"The \";\n"
"                             a byte vocabulary only)\n"
"  --sample-tokens IDS        ... or these token ids (\"50256,464\"; default for a vocabulary\n"
"                             that is not bytes: V-1, GPT-2's <|endoftext|>)\n"
"  --sample-temperature T     ... drawn at temperature T (default 0.8; 0 = greedy)\n"
"  --sample-length N          ... N tokens (default 200; 0 = no sample)\n"
"  --epochs E                 epochs (default 10)\n"
"  --batch-size B             batch size PER RANK (default 64); global = B x ranks x accum\n"
"  --lr LR                    learning rate (default sgd 0.01, adam/adamw 0.001)\n"
"  --optimizer sgd|adam|adamw (default sgd)\n"
"  --momentum M               sgd momentum (default 0.9)   --nesterov 0|1\n"
"  --weight-decay WD          (default 0; adamw 0.01; gpt: on matrices and embeddings only)\n"
"  --schedule const|cosine    lr decay after warm-up (default const)\n"
"  --warmup-steps W           linear warm-up steps (default 0)   --min-lr LR (cosine floor)\n"
"  --seed S                   seed for init, shuffling, dropout (default 0)\n"
"  --data DIR|FILE            Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist);\n"
"                             gpt: a text file or directory (default /usr/share/games/fortunes),\n"
"                             or llm.c token shards: a .bin file, a directory of them or a quoted\n"
"                             glob ('dir/*.bin'; *_train_* / *_val_* name the splits)\n"
"  --train-limit N            use the first N training images (default all); gpt: N windows per\n"
"                             epoch (default: every window of the training split)\n"
"  --test-limit N             use the first N test images (default all); gpt: N validation\n"
"                             windows spread over the split (default: all, non-overlapping)\n"
"  --eval-every K             also evaluate (and print the loss) every K steps\n"
"  --max-steps N              stop after N optimizer steps (default -1: no limit; 0: no step,\n"
"                             only evaluate, sample and --save-model: inference, conversion)\n"
"  --accum-steps K            micro-batches per step, accumulated without communication\n"
"  --clip-grad-norm C         clip the global gradient L2 norm (over all shards) to C\n"
"  --threads T                BLAS threads per process (default 1)\n"
"  --dp-threads N             data parallel over N threads of this process (default 1): the\n"
"                             batch cut into N slices, one gradient reduction, one step;\n"
"                             combines with ranks; BLAS single-threaded (--threads 1)\n"
"  --shuffle 0|1  --drop-last 0|1  --eval 0|1  --quiet\n"
"  --json FILE                JSON lines: one object per step and per epoch\n"
"  --tensorboard DIR          TensorBoard event file in DIR (created): the same numbers as\n"
"                             curves (tensorboard --logdir DIR)\n"
"  --timeline FILE            Chrome trace per rank (\"%d\" in FILE becomes the rank;\n"
"                             otherwise rank r > 0 writes FILE.r)\n"
"  --save-model FILE|DIR      write the trained model (safetensors, state_dict names)\n"
"  --save-format dtrain|hf|llmc|llmc-bf16\n"
"                             dtrain: FILE (default); hf (gpt): DIR gets model.safetensors and\n"
"                             config.json for transformers' GPT2LMHeadModel.from_pretrained;\n"
"                             llmc, llmc-bf16 (gpt): FILE in llm.c's model format, float32 or\n"
"                             bfloat16 (train_gpt2cu -e FILE)\n"
"  --checkpoint-dir DIR       write training-state checkpoints (crash-safe) to DIR\n"
"  --checkpoint-every K       ... every K optimizer steps (default: at the end only)\n"
"  --resume DIR               continue from a checkpoint (any world size / ZeRO level)\n"
"  --config FILE              dist config JSON (see below)   --dump-config FILE\n"
"dist config (JSON keys; env DTRAIN_<KEY>; flags --key with '-' for '_'):\n"
"  --enable-data-parallel 0|1 --zero-opt-level 0..3 (alias --zero) --bucket-size-mb MB\n"
"  --first-bucket-mb MB --overlap 0|1 --broadcast-buffers 0|1 --sync-bn 0|1 --timeout-s S\n"
"  --grad-comm-dtype f32|bf16|f16 (gradients between processes)\n"
"  --shard-group world|host   ZeRO shards over all ranks (default) or over each host's ranks,\n"
"                             replicated across hosts (hybrid sharding; same ranks per host)\n"
"  --zero-offload 0|1         ZeRO with --device cuda: each rank's shard and optimizer state\n"
"                             on the GPU (0, default) or on the host (1, ZeRO-Offload)\n";
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return DT_ERR(DT_ERR_INVALID, "flag %s: '%s' is not an integer in [%ld, %ld]", flag, v, lo, hi);
    *out = x;
    return DT_OK;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < lo || x > hi)
        return DT_ERR(DT_ERR_INVALID, "flag %s: '%s' is not a number in [%g, %g]", flag, v, lo, hi);
    *out = x;
    return DT_OK;
}

static int parse_choice(const char *flag, const char *v, const char *const *choices, char *dst, size_t cap) {
    for (int i = 0; choices[i]; i++)
        if (strcmp(v, choices[i]) == 0) { snprintf(dst, cap, "%s", v); return DT_OK; }
    return DT_ERR(DT_ERR_INVALID, "flag %s: '%s' is not one of the accepted values", flag, v);
}

/* --sample-tokens: token ids separated by commas or spaces */
static int parse_tokens(const char *flag, const char *v, dt_train_options *o) {
    const int cap = (int)(sizeof o->sample_tokens / sizeof o->sample_tokens[0]);
    int n = 0;
    for (const char *p = v;;) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x >= 1L << 24 || (*end && *end != ',' && *end != ' '))
            return DT_ERR(DT_ERR_INVALID, "flag %s: '%s' is not a list of token ids (integers in [0, 2^24), separated "
                          "by commas)", flag, v);
        if (n == cap) return DT_ERR(DT_ERR_INVALID, "flag %s: more than %d token ids", flag, cap);
        o->sample_tokens[n++] = (int32_t)x;
        p = end;
    }
    if (!n) return DT_ERR(DT_ERR_INVALID, "flag %s: no token id in '%s'", flag, v);
    o->sample_ntokens = n;
    return DT_OK;
}

static int copy_path(const char *flag, const char *v, char *dst, size_t cap) {
    if (!*v || strlen(v) >= cap) return DT_ERR(DT_ERR_INVALID, "flag %s: path is empty or longer than %zu", flag, cap - 1);
    snprintf(dst, cap, "%s", v);
    return DT_OK;
}

/* Flags that would be accepted and silently have no effect, or contradict each
 * other, are refused (usage errors): what a model has, by name. */
typedef struct model_traits { const char *name; int batch_norm, dropout, hidden, channels, gpt; } model_traits;
static const model_traits k_models[] = {
    {"mlp", 0, 0, 1, 0, 0}, {"lenet", 1, 0, 0, 0, 0}, {"cnn", 1, 1, 0, 1, 0}, {"gpt", 0, 0, 0, 0, 1}};

enum { G_MOMENTUM = 1, G_NESTEROV = 2, G_DROPOUT = 4, G_HIDDEN1 = 8, G_HIDDEN2 = 16, G_MIN_LR = 32, G_EVERY = 64,
       G_SHUFFLE = 128, G_DROP_LAST = 256, G_CHANNELS1 = 512, G_CHANNELS2 = 1024 };

/* The flags only a gpt has, by bit (G_GPT << i). */
#define G_GPT 2048u
static const char *const k_gpt_flags[] = {"--preset", "--n-layer", "--n-head", "--n-embd", "--block-size",
                                          "--recompute", "--sample-prompt", "--sample-temperature",
                                          "--sample-length", "--vocab-size", "--sample-tokens", "--device",
                                          "--precision", "--seq-len", NULL};
enum { GPT_SAMPLE_PROMPT = 6, GPT_SAMPLE_TOKENS = 10 }; /* their bits: G_GPT << i */

static int gpt_flag_bit(const char *f) {
    for (int i = 0; k_gpt_flags[i]; i++)
        if (!strcmp(f, k_gpt_flags[i])) return i;
    return -1;
}

/* n_embd divisible by n_head, with the preset's sizes where no flag gives them
 * (with --init-from the file gives the sizes: dt_trainer_create checks them) */
static int check_gpt_sizes(const dt_train_options *o, unsigned given) {
    if (*o->init_from) return DT_OK;
    dt_model_config c;
    int rc = dt_model_config_default(&c, *o->preset ? o->preset : "gpt");
    if (rc) return rc;
    int nh = o->n_head ? o->n_head : c.n_head, ne = o->n_embd ? o->n_embd : c.n_embd;
    int bs = o->block_size ? o->block_size : c.block_size;
    if (o->seq_len > bs)
        return DT_ERR(DT_ERR_INVALID, "flag --seq-len %d is more than the block size %d (%s): a window is at most "
                      "the model's positions", o->seq_len, bs, o->block_size ? "--block-size" :
                      *o->preset ? o->preset : "preset gpt-demo");
    if (ne % nh != 0) {
        const char *f = (given & (G_GPT << 2)) ? "--n-head" : "--n-embd";
        return DT_ERR(DT_ERR_INVALID, "flag %s: n_embd=%d is not divisible by n_head=%d (%s; the head size is "
                      "n_embd / n_head)", f, ne, nh, *o->preset ? o->preset : "preset gpt-demo");
    }
    return DT_OK;
}

/* what --device cuda and --precision bf16 combine with */
static int check_device(const dt_train_options *o) {
    const int cuda = strcmp(o->device, "cuda") == 0;
    if (strcmp(o->precision, "bf16") == 0 && !cuda)
        return DT_ERR(DT_ERR_INVALID, "flag --precision bf16 computes on a GPU: it needs --device cuda (the CPU "
                      "computes in fp32)");
    if (cuda && o->dp_threads > 1)
        return DT_ERR(DT_ERR_INVALID, "flag --dp-threads %d: data-parallel threads share one process's CPU; with "
                      "--device cuda run one rank per GPU instead", o->dp_threads);
    return DT_OK;
}

static int check_conflicts(const dt_train_options *o, unsigned given) {
    int rc, sgd = strcmp(o->optimizer, "sgd") == 0;
    if ((given & G_MOMENTUM) && !sgd)
        return DT_ERR(DT_ERR_INVALID, "flag --momentum applies to --optimizer sgd only (%s has no momentum setting: "
                      "its betas are fixed)", o->optimizer);
    if ((given & G_NESTEROV) && o->nesterov && !sgd)
        return DT_ERR(DT_ERR_INVALID, "flag --nesterov applies to --optimizer sgd only (not %s)", o->optimizer);
    if (sgd && o->nesterov && o->momentum <= 0)
        return DT_ERR(DT_ERR_INVALID, "flag --nesterov 1 needs a momentum > 0 (--momentum is %g)", o->momentum);
    if ((given & G_MIN_LR) && strcmp(o->schedule, "cosine") != 0)
        return DT_ERR(DT_ERR_INVALID, "flag --min-lr is the floor of --schedule cosine (the schedule is %s)",
                      o->schedule);
    if ((given & G_EVERY) && o->checkpoint_every > 0 && !*o->checkpoint_dir)
        return DT_ERR(DT_ERR_INVALID, "flag --checkpoint-every needs --checkpoint-dir DIR");
    if (o->dist.zero_opt_level > 0 && !o->dist.enable_data_parallel)
        return DT_ERR(DT_ERR_INVALID, "zero_opt_level %d shards over the data-parallel ranks: it needs "
                      "enable_data_parallel (both from flags, DTRAIN_* variables or --config)", o->dist.zero_opt_level);
    if (strcmp(o->save_format, "dtrain") != 0 && !*o->save_model)
        return DT_ERR(DT_ERR_INVALID, "flag --save-format %s says how --save-model %s is written: give --save-model",
                      o->save_format, strcmp(o->save_format, "hf") == 0 ? "DIR" : "FILE");
    if (o->dist.shard_group == DT_SHARD_HOST && o->dist.zero_opt_level == 0)
        return DT_ERR(DT_ERR_INVALID, "shard_group host shards ZeRO's state per host: it needs zero_opt_level 1, 2 or 3 "
                      "(data parallelism at level 0 shards nothing; from flags, DTRAIN_* variables or --config)");
    if (o->dist.zero_offload && o->dist.zero_opt_level == 0)
        return DT_ERR(DT_ERR_INVALID, "zero_offload puts ZeRO's shard and optimizer state on the host: it needs "
                      "zero_opt_level 1, 2 or 3 (from flags, DTRAIN_* variables or --config)");
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++) {
        const model_traits *m = &k_models[i];
        if (strcmp(o->model, m->name) != 0) continue;
        if (o->dist.sync_bn && !m->batch_norm)
            return DT_ERR(DT_ERR_INVALID, "sync_bn: model %s has no batch norm (sync_bn comes from --sync-bn, "
                          "DTRAIN_SYNC_BN or the --config file)", m->name);
        if ((given & G_DROPOUT) && !m->dropout)
            return DT_ERR(DT_ERR_INVALID, "flag --dropout: model %s has no dropout", m->name);
        if ((given & (G_HIDDEN1 | G_HIDDEN2)) && !m->hidden)
            return DT_ERR(DT_ERR_INVALID, "flag %s: model %s has no hidden sizes%s",
                          given & G_HIDDEN1 ? "--hidden1" : "--hidden2", m->name,
                          m->channels ? "; its conv channels are --channels1/--channels2" : "");
        if ((given & (G_CHANNELS1 | G_CHANNELS2)) && !m->channels)
            return DT_ERR(DT_ERR_INVALID, "flag %s: model %s has no conv channels to set (only cnn has)%s",
                          given & G_CHANNELS1 ? "--channels1" : "--channels2", m->name,
                          m->hidden ? "; its widths are --hidden1/--hidden2" : "");
        for (int g = 0; !m->gpt && k_gpt_flags[g]; g++)
            if (given & (G_GPT << g))
                return DT_ERR(DT_ERR_INVALID, "flag %s applies to --model gpt only (model %s)", k_gpt_flags[g], m->name);
        if (strcmp(o->save_format, "dtrain") != 0 && !m->gpt)
            return DT_ERR(DT_ERR_INVALID, "flag --save-format %s: the %s layout is GPT-2's; model %s is saved in "
                          "dtrain's (--save-format dtrain)", o->save_format,
                          strcmp(o->save_format, "hf") == 0 ? "Hugging Face" : "llm.c", m->name);
        if (m->gpt && (given & (G_GPT << GPT_SAMPLE_PROMPT)) && (given & (G_GPT << GPT_SAMPLE_TOKENS)))
            return DT_ERR(DT_ERR_INVALID, "flags --sample-prompt and --sample-tokens both give the prompt: give one");
        if (m->gpt && (given & (G_SHUFFLE | G_DROP_LAST)))
            return DT_ERR(DT_ERR_INVALID, "flag %s: gpt trains on random text windows (a keyed permutation per "
                          "epoch, dtrain/text.h); it applies to the image data sets",
                          given & G_SHUFFLE ? "--shuffle" : "--drop-last");
        if (m->gpt && (rc = check_device(o))) return rc;
        if (m->gpt) return check_gpt_sizes(o, given);
    }
    return DT_OK;
}

int dt_train_parse_args(dt_train_options *o, int argc, char **argv) {
    if (!o || (argc > 0 && !argv)) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    static const char *const models[] = {"mlp", "lenet", "cnn", "gpt", NULL};
    static const char *const presets[] = {"gpt-test", "gpt-demo", "gpt2-124m", NULL};
    static const char *const optims[] = {"sgd", "adam", "adamw", NULL};
    static const char *const scheds[] = {"const", "cosine", NULL};
    static const char *const devices[] = {"cpu", "cuda", NULL};
    static const char *const precisions[] = {"fp32", "bf16", NULL};
    static const char *const formats[] = {"dtrain", "hf", "llmc", "llmc-bf16", NULL};
    /* pass 1: --config FILE, then the environment, so flags win */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--config", 8) == 0 && (a[8] == '=' || a[8] == '\0')) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[i + 1] : NULL);
            if (!v) return DT_ERR(DT_ERR_INVALID, "flag --config needs a value");
            int rc = dt_config_load(&o->dist, v);
            if (rc) return rc;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { fputs(dt_train_usage(), stdout); return 1; }
    }
    int rc = dt_config_from_env(&o->dist);
    if (rc) return rc;
    char dump[256] = "";
    unsigned given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) return DT_ERR(DT_ERR_INVALID, "unexpected argument '%s'", a);
        char name[64];
        const char *eq = strchr(a, '='), *v;
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name) return DT_ERR(DT_ERR_INVALID, "unknown flag '%s'", a);
        memcpy(name, a, nl);
        name[nl] = '\0';
        if (strcmp(name, "--quiet") == 0 && !eq) { o->quiet = 1; continue; }
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return DT_ERR(DT_ERR_INVALID, "flag %s needs a value", name);
        const char *f = name;
        long l = 0;
        double d = 0;
        if (!strcmp(f, "--model")) rc = parse_choice(f, v, models, o->model, sizeof o->model);
        else if (!strcmp(f, "--optimizer")) rc = parse_choice(f, v, optims, o->optimizer, sizeof o->optimizer);
        else if (!strcmp(f, "--schedule")) rc = parse_choice(f, v, scheds, o->schedule, sizeof o->schedule);
        else if (!strcmp(f, "--hidden1")) { rc = parse_long(f, v, 1, 1 << 16, &l); o->hidden1 = (int)l; given |= G_HIDDEN1; }
        else if (!strcmp(f, "--hidden2")) { rc = parse_long(f, v, 1, 1 << 16, &l); o->hidden2 = (int)l; given |= G_HIDDEN2; }
        else if (!strcmp(f, "--channels1")) { rc = parse_long(f, v, 1, 1 << 16, &l); o->conv_channels1 = (int)l; given |= G_CHANNELS1; }
        else if (!strcmp(f, "--channels2")) { rc = parse_long(f, v, 1, 1 << 16, &l); o->conv_channels2 = (int)l; given |= G_CHANNELS2; }
        else if (!strcmp(f, "--dropout")) { rc = parse_double(f, v, 0, 0.99, &d); o->dropout = (float)d; given |= G_DROPOUT; }
        else if (gpt_flag_bit(f) >= 0) {
            given |= G_GPT << gpt_flag_bit(f);
            if (!strcmp(f, "--preset")) rc = parse_choice(f, v, presets, o->preset, sizeof o->preset);
            else if (!strcmp(f, "--n-layer")) { rc = parse_long(f, v, 1, 4096, &l); o->n_layer = (int)l; }
            else if (!strcmp(f, "--n-head")) { rc = parse_long(f, v, 1, 1 << 16, &l); o->n_head = (int)l; }
            else if (!strcmp(f, "--n-embd")) { rc = parse_long(f, v, 1, 1 << 16, &l); o->n_embd = (int)l; }
            else if (!strcmp(f, "--block-size")) { rc = parse_long(f, v, 1, 1 << 20, &l); o->block_size = (int)l; }
            else if (!strcmp(f, "--seq-len")) { rc = parse_long(f, v, 1, 1 << 20, &l); o->seq_len = (int)l; }
            else if (!strcmp(f, "--recompute")) { rc = parse_long(f, v, 0, 1, &l); o->recompute = (int)l; }
            else if (!strcmp(f, "--device")) rc = parse_choice(f, v, devices, o->device, sizeof o->device);
            else if (!strcmp(f, "--precision")) rc = parse_choice(f, v, precisions, o->precision, sizeof o->precision);
            else if (!strcmp(f, "--sample-temperature")) rc = parse_double(f, v, 0, 100, &o->sample_temperature);
            else if (!strcmp(f, "--sample-length")) { rc = parse_long(f, v, 0, 1 << 20, &l); o->sample_length = (int)l; }
            else if (!strcmp(f, "--vocab-size")) { rc = parse_long(f, v, 1, 1 << 24, &l); o->vocab_size = (int)l; }
            else if (!strcmp(f, "--sample-tokens")) rc = parse_tokens(f, v, o);
            else if (strlen(v) >= sizeof o->sample_prompt)
                rc = DT_ERR(DT_ERR_INVALID, "flag --sample-prompt: longer than %zu bytes", sizeof o->sample_prompt - 1);
            else snprintf(o->sample_prompt, sizeof o->sample_prompt, "%s", v);
        }
        else if (!strcmp(f, "--eval-every")) rc = parse_long(f, v, 0, 1L << 40, &o->eval_every);
        else if (!strcmp(f, "--epochs")) { rc = parse_long(f, v, 1, 100000, &l); o->epochs = (int)l; }
        else if (!strcmp(f, "--batch-size")) { rc = parse_long(f, v, 1, 1 << 20, &l); o->batch_size = (int)l; }
        else if (!strcmp(f, "--lr")) rc = parse_double(f, v, 0, 100, &o->lr);
        else if (!strcmp(f, "--momentum")) { rc = parse_double(f, v, 0, 0.999999, &o->momentum); given |= G_MOMENTUM; }
        else if (!strcmp(f, "--nesterov")) { rc = parse_long(f, v, 0, 1, &l); o->nesterov = (int)l; given |= G_NESTEROV; }
        else if (!strcmp(f, "--weight-decay")) rc = parse_double(f, v, 0, 10, &o->weight_decay);
        else if (!strcmp(f, "--warmup-steps")) rc = parse_long(f, v, 0, 1L << 40, &o->warmup_steps);
        else if (!strcmp(f, "--min-lr")) { rc = parse_double(f, v, 0, 100, &o->min_lr); given |= G_MIN_LR; }
        else if (!strcmp(f, "--seed")) { rc = parse_long(f, v, 0, 0x7fffffffL, &l); o->seed = (uint64_t)l; }
        else if (!strcmp(f, "--data")) rc = copy_path(f, v, o->data_dir, sizeof o->data_dir);
        else if (!strcmp(f, "--train-limit")) rc = parse_long(f, v, 0, 1L << 40, &o->train_limit);
        else if (!strcmp(f, "--test-limit")) rc = parse_long(f, v, 0, 1L << 40, &o->test_limit);
        else if (!strcmp(f, "--max-steps")) rc = parse_long(f, v, -1, 1L << 40, &o->max_steps);
        else if (!strcmp(f, "--clip-grad-norm")) rc = parse_double(f, v, 0, 1e9, &o->clip_grad_norm);
        else if (!strcmp(f, "--peak-tflops")) rc = parse_double(f, v, 0, 1e6, &o->peak_tflops);
        else if (!strcmp(f, "--accum-steps")) { rc = parse_long(f, v, 1, 1 << 16, &l); o->accum_steps = (int)l; }
        else if (!strcmp(f, "--threads")) { rc = parse_long(f, v, 1, 1024, &l); o->threads = (int)l; }
        else if (!strcmp(f, "--dp-threads")) { rc = parse_long(f, v, 1, 1024, &l); o->dp_threads = (int)l; }
        else if (!strcmp(f, "--shuffle")) { rc = parse_long(f, v, 0, 1, &l); o->shuffle = (int)l; given |= G_SHUFFLE; }
        else if (!strcmp(f, "--drop-last")) { rc = parse_long(f, v, 0, 1, &l); o->drop_last = (int)l; given |= G_DROP_LAST; }
        else if (!strcmp(f, "--eval")) { rc = parse_long(f, v, 0, 1, &l); o->eval = (int)l; }
        else if (!strcmp(f, "--json")) rc = copy_path(f, v, o->json_path, sizeof o->json_path);
        else if (!strcmp(f, "--timeline")) rc = copy_path(f, v, o->timeline_path, sizeof o->timeline_path);
        else if (!strcmp(f, "--tensorboard")) rc = copy_path(f, v, o->tensorboard_dir, sizeof o->tensorboard_dir);
        else if (!strcmp(f, "--save-model")) rc = copy_path(f, v, o->save_model, sizeof o->save_model);
        else if (!strcmp(f, "--save-format")) rc = parse_choice(f, v, formats, o->save_format, sizeof o->save_format);
        else if (!strcmp(f, "--init-from")) rc = copy_path(f, v, o->init_from, sizeof o->init_from);
        else if (!strcmp(f, "--checkpoint-dir")) rc = copy_path(f, v, o->checkpoint_dir, sizeof o->checkpoint_dir);
        else if (!strcmp(f, "--checkpoint-every")) { rc = parse_long(f, v, 0, 1L << 40, &o->checkpoint_every); given |= G_EVERY; }
        else if (!strcmp(f, "--resume")) rc = copy_path(f, v, o->resume_dir, sizeof o->resume_dir);
        else if (!strcmp(f, "--config")) rc = DT_OK; /* applied in pass 1 */
        else if (!strcmp(f, "--dump-config")) rc = copy_path(f, v, dump, sizeof dump);
        else {
            char key[64];
            const char *k = !strcmp(f, "--zero") ? "--zero-opt-level" : f;
            snprintf(key, sizeof key, "%s", k + 2);
            for (char *p = key; *p; p++) if (*p == '-') *p = '_';
            if (!dt_config_has_key(key)) return DT_ERR(DT_ERR_INVALID, "unknown flag '%s' (see --help)", f);
            rc = dt_config_set(&o->dist, key, v);
            if (rc) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", dt_last_error());
                return DT_ERR(DT_ERR_INVALID, "flag %s: %s", f, msg);
            }
        }
        if (rc) return rc;
    }
    if ((rc = check_conflicts(o, given))) return rc;
    if (*dump) return dt_config_save(&o->dist, dump);
    return DT_OK;
}
