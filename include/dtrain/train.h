/* dtrain/train.h - the trainer: a dtrain model trained on its family's data
 * (classifiers on Fashion-MNIST, the gpt on byte-level text), single process
 * or data parallel over a communicator (what dtrain-train runs; usable from
 * any C program and from Python through ctypes).
 *
 * The trainer asks the model for its io description (dtrain/model.h) and its
 * family's data source for batches (src/train/source.h), and drives one
 * parallel strategy (src/parallel/strategy.h: none, ddp, zero1-3, chosen
 * from the dist config).
 *
 * Data parallelism (cfg.dist.enable_data_parallel, the default): every rank
 * builds the same model, parameters and batch-norm buffers are broadcast from
 * rank 0, each rank trains on its part of every global batch (images: the
 * distributed sampler, a permutation seeded by (seed, epoch), identical on all
 * ranks, split into N strided parts, padded by wrapping unless drop_last;
 * text: the global micro-batch of B x N windows cut into N contiguous parts,
 * dtrain/text.h), gradients are averaged in buckets overlapped with backward
 * (dtrain/ddp.h), and (with overlap on and no gradient clipping) the
 * optimizer steps each bucket's parameters as soon as that bucket is reduced
 * (dt_ddp_finish_each + dt_optim_step_range: the same values as one step over
 * all parameters). batch_size is PER RANK: the global batch is batch_size x N
 * (x accum_steps). Metrics printed by rank 0 are reduced over all ranks; the
 * evaluation set is split across ranks.
 *
 * DEVICES (device "cuda", dtrain-train --device cuda; the gpt family). Each
 * rank computes on CUDA device local_rank % (devices it sees): the model's
 * parameters, gradients, activations and (none, ddp) the optimizer state are
 * device memory, every kernel runs on the device, and nothing goes through
 * the host inside a step (the loss and the statistics are read after the
 * backward). Data parallelism reduces the gradients' buckets on the device
 * (NCCL, or staged through the host where ranks share a GPU: coll.h, "Device
 * memory"); ZeRO moves parameters and gradients on the device and steps its
 * shard on the device (dtrain/zero.h, "Device memory"; on the host with
 * --zero-offload 1). A compressed grad_comm_dtype (bf16, f16) packs the
 * gradients on the device (coll.h, compressed wires on device memory). Each
 * rank's GPU is local_rank % the devices it sees (dtrain-train sets
 * DTRAIN_CUDA_DEVICE=local before dt_init, so that the NCCL communicator is
 * made on it). precision "bf16":
 * bf16 activations and compute copy of the parameters, f32 parameters,
 * gradients, optimizer state and loss (dtrain/model.h, PRECISION).
 * Checkpoints and --save-model are the CPU's formats: a GPU run resumes on
 * the CPU and the reverse. Refused (exit 2): --device cuda with a classifier
 * or --dp-threads > 1, --precision bf16 without --device cuda.
 *
 * DP THREADS (dp_threads = N > 1, dtrain-train --dp-threads N; seed 004's
 * DataParallel): N threads of this process train one model. Each thread runs
 * forward and backward on a model replica with its own activations and its
 * own gradient buffer; the parameters are one copy, shared read-only while
 * the threads run. Every micro-batch of batch_size samples (this rank's) is
 * cut into N contiguous slices of batch_size/N samples, the first
 * batch_size mod N threads taking one more: an uneven split is allowed, each
 * thread's loss weighted by its share, so the step is the gradient of the
 * micro-batch's mean loss. Batch-norm statistics are summed over the threads
 * (and over the ranks with sync_bn): the threads are invisible, a run with N
 * threads equals the 1-thread run with the same batch_size (the same global
 * batch) up to float rounding (<= 1e-5 relative after 50 steps, tests/train/
 * test_dp_threads.c), for every model without dropout (cnn's dropout masks
 * are drawn per thread). The gradients are then reduced between the threads
 * in parallel (thread i sums slice i of the flat vector over the replicas in
 * replica order: reproducible, run to run), and once per process the
 * cross-rank reduction (DDP's buckets) and ONE optimizer step follow: threads
 * within a process, ranks across. No launcher or MPI is needed. BLAS runs
 * single-threaded in each thread: threads must be 1. Refused (DT_ERR_INVALID,
 * dtrain-train exit 2): dp_threads < 1, dp_threads > batch_size (a thread
 * would have no sample), threads > 1 with dp_threads > 1, zero_opt_level > 0
 * with dp_threads > 1 (ZeRO moves parameters and gradients per layer; not
 * combined with threads yet). Evaluation runs on one thread.
 *
 * INIT FROM (init_from, dtrain-train --init-from FILE): every rank reads
 * the file (dtrain/weights.h) and starts from its parameters (and batch-norm
 * buffers) instead of the random initialisation, at any world size, ZeRO
 * stage or dp_threads. For gpt the sizes come from the file: n_layer,
 * n_embd, vocab_size and block_size from the tensors' shapes; n_head (in no
 * shape) from the n_head option when given, else from dtrain's metadata or
 * the config.json beside a Hugging Face file, else from the preset when one
 * is given (DT_ERR_INVALID naming --n-head without any of them); a
 * size option that contradicts the file (n_layer, n_embd, block_size,
 * vocab_size) is refused naming the option, the tensor and both values
 * (DT_ERR_MISMATCH; dtrain-train exit 2, as for every refusal of the
 * file: a tensor or option the model has not, DT_ERR_UNSUPPORTED). The
 * classifiers read dtrain's own files (the same flags as the run that
 * wrote them). With resume_dir as well, the checkpoint's state replaces the
 * file's parameters (the file then only gives the sizes).
 */
#ifndef DTRAIN_TRAIN_H
#define DTRAIN_TRAIN_H

#include <stdint.h>
#include <stdio.h>
#include "dtrain/comm.h"
#include "dtrain/config.h"
#include "dtrain/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The end-of-run sample's default prompt (text, for a byte vocabulary). */
#define DT_TRAIN_DEFAULT_PROMPT "The "

typedef struct dt_train_options {
    char model[16];          /* "mlp" | "lenet" | "cnn" | "gpt" (default lenet) */
    /* model sizes, 0 = the model's default (as in dt_model_config) */
    int hidden1, hidden2;    /* mlp: the widths of fc1 and fc2 (--hidden1/2) */
    int conv_channels1, conv_channels2; /* cnn: conv1's and conv2's channels (--channels1/2) */
    float dropout;           /* cnn dropout; < 0 = default */
    /* gpt (--model gpt): sizes from a preset, each overridable */
    char preset[16];         /* "gpt-test" | "gpt-demo" | "gpt2-124m"; "" = gpt-demo's sizes */
    int n_layer, n_head, n_embd, block_size; /* 0 = the preset's, or init_from's */
    int seq_len;             /* gpt: the training and evaluation windows' length T,
                              * 1..block_size (--seq-len; 0 = block_size): llm.c's -t */
    int vocab_size;          /* gpt: 0 = init_from's, else the data's: 256 for bytes,
                              * 50257 for llm.c token shards (dtrain/text.h) */
    int recompute;           /* activation recomputation (gpt), default 0 */
    char device[8];          /* "cpu" (default) | "cuda" (gpt): see DEVICES below */
    char precision[8];       /* "fp32" (default) | "bf16" (--device cuda) */
    double peak_tflops;      /* the device's peak FLOP rate in TFLOP/s for the model FLOP
                              * utilisation (mfu) of the metrics; 0 = from the device's
                              * known peak (cuda: by compute capability and SM count for
                              * the precision; cpu: none, mfu not reported) */
    char sample_prompt[256]; /* gpt: the end-of-run sample continues this (default
                              * DT_TRAIN_DEFAULT_PROMPT); any other text is refused for a
                              * vocabulary that is not bytes (256) */
    int32_t sample_tokens[256]; /* gpt: ... or these token ids (sample_ntokens of them; any
                              * vocabulary; default none: the text prompt for bytes,
                              * token vocab_size - 1 otherwise, GPT-2's <|endoftext|>) */
    int sample_ntokens;
    double sample_temperature; /* default 0.8 (0 = greedy) */
    int sample_length;       /* tokens sampled at the end (gpt; default 200, 0 = none) */
    char init_from[256];     /* start from these weights ("" = random init; dtrain/weights.h:
                              * a safetensors file of dtrain, PyTorch / nanoGPT or Hugging Face's
                              * GPT-2, a sharded checkpoint's index, a save_pretrained folder,
                              * llm.c's model file; gpt sizes from the file, see INIT FROM) */
    char save_format[16];    /* save_model's layout: "dtrain" (default: a file of state_dict
                              * names), "hf" (gpt: save_model is a directory that gets
                              * model.safetensors and config.json for transformers), "llmc"
                              * or "llmc-bf16" (gpt: a file in llm.c's model format, float32
                              * or bfloat16, dtrain/weights.h) */
    long eval_every;         /* also evaluate every K optimizer steps (0 = only after each epoch) */
    int epochs;              /* default 10 */
    int batch_size;          /* per rank, default 64 */
    double lr;               /* default 0.01 for sgd, 1e-3 for adam/adamw (if 0) */
    char optimizer[8];       /* "sgd" | "adam" | "adamw" (default sgd) */
    double momentum;         /* sgd, default 0.9 */
    int nesterov;
    double weight_decay;     /* default 0 (adamw: 0.01) ; < 0 = default */
    char schedule[8];        /* "const" | "cosine" (default const) */
    long warmup_steps;       /* default 0 */
    double min_lr;           /* cosine floor, default 0 */
    uint64_t seed;           /* default 0 */
    char data_dir[256];      /* "" (default) = the family's data: /usr/share/datasets/fashion-mnist
                              * (classifiers), /usr/share/games/fortunes (gpt: a file or directory) */
    long train_limit;        /* use the first N training samples (0 = all); gpt: N windows per epoch */
    long test_limit;         /* use the first N test samples (0 = all); gpt: N validation windows
                              * spread evenly over the validation split */
    long max_steps;          /* stop after N optimizer steps (-1, the default: no limit;
                              * 0: no step, only the evaluation, sample and model export) */
    int accum_steps;         /* micro-batches per optimizer step (no_sync), default 1 */
    double clip_grad_norm;   /* clip the global gradient L2 norm to this (0 = off) */
    int threads;             /* BLAS threads per process, default 1; must be 1 with dp_threads > 1 */
    int dp_threads;          /* data-parallel threads in this process, default 1 (see DP THREADS) */
    int shuffle;             /* default 1 */
    int drop_last;           /* sampler drops the tail instead of padding (default 0) */
    int eval;                /* evaluate on the test set after each epoch (default 1) */
    int quiet;               /* no progress output */
    char json_path[256];     /* JSON lines: one object per step and per epoch ("" = off) */
    char timeline_path[256]; /* Chrome trace per rank ("" = off); "%d" -> rank */
    char save_model[256];    /* write the trained model as safetensors here ("" = off) */
    char checkpoint_dir[256];/* training-state checkpoints go here ("" = off) */
    long checkpoint_every;   /* write one every K optimizer steps (0: only at the end) */
    char resume_dir[256];    /* continue from this checkpoint ("" = start fresh) */
    dt_config dist;          /* enable_data_parallel, zero_opt_level, buckets, overlap, sync_bn */
    dt_comm *comm;           /* communicator to train over; NULL = world */
    char tensorboard_dir[256]; /* TensorBoard event file written here by rank 0 ("" = off;
                              * created with its parents): the --json records' numbers
                              * as scalars tagged "<record type>/<key>" (docs/trainer.md) */
} dt_train_options;

typedef struct dt_train_result {
    long steps;              /* optimizer steps taken */
    int epochs;              /* epochs trained in by this run, counted to the last
                              * (a partial one counts; one with nothing left to
                              * train after a resume does not): 0 = nothing trained */
    double last_loss;        /* mean training loss of the last epoch, over all ranks;
                              * NaN if this run trained no step (resumed from a
                              * checkpoint already at --epochs / --max-steps) */
    double train_acc;        /* last epoch, over all ranks, in [0,1]; NaN as last_loss */
    double test_acc;         /* last evaluation, whole test set, in [0,1]; -1 if none */
    double samples_per_s;    /* global training throughput of the last epoch */
    double median_step_s;    /* median wall time of one optimizer step (this rank) */
    double comm_hidden;      /* fraction of bucket communication time that overlapped
                              * backward (over synced steps after the first; -1 if no DP) */
    double comm_hidden_compute; /* the same, overlapping backward or the optimizer steps
                              * that run per bucket while later buckets are reduced */
    double grad_norm;        /* global gradient norm of the last step (before clipping);
                              * computed only when clipping or on the last planned
                              * step (-1 if the run stopped before it) */
    double test_loss;        /* loss of the last evaluation (gpt: validation loss per
                              * token = per byte, nats); NaN if none */
    double tokens_per_s;     /* global training throughput of the last epoch in
                              * positions (gpt: tokens; classifiers: = samples_per_s) */
    double mfu;              /* model FLOP utilisation of the median step (gpt): its FLOPs,
                              * (6P + 12 L C T) per token (PaLM's count: forward and
                              * backward, attention included) times the global tokens per
                              * second, over the peak of all ranks' devices (peak_tflops,
                              * or the GPU's known peak); -1 where the peak is unknown */
} dt_train_result;

typedef struct dt_trainer dt_trainer;

/* Defaults as documented in dt_train_options; dist from dt_config_default. */
void dt_train_options_default(dt_train_options *o);
/* Parse command-line flags (argv[0] skipped) onto *o. "--flag value" or
 * "--flag=value". Returns DT_OK, 1 when --help was given (usage printed to
 * stdout), or DT_ERR_INVALID naming the flag and value. Flags that contradict
 * each other or would have no effect are refused too: --momentum or
 * --nesterov with adam/adamw, --nesterov 1 with momentum 0, sync_bn with a
 * model without batch norm (mlp, gpt), zero_opt_level > 0 with
 * enable_data_parallel off, --dropout with mlp/lenet/gpt, --hidden1/2 with
 * lenet/cnn/gpt, --channels1/2 with mlp/lenet/gpt, --min-lr without
 * --schedule cosine, --checkpoint-every without
 * --checkpoint-dir, the gpt flags (--preset, --n-layer, --n-head, --n-embd,
 * --block-size, --seq-len, --vocab-size, --recompute, --sample-*) with a classifier,
 * --shuffle / --drop-last with gpt, gpt sizes whose n_embd (the flag's or the
 * preset's; not checked with --init-from) is not divisible by n_head,
 * --seq-len above the block size (the flag's or the preset's; with
 * --init-from dt_trainer_create checks it against the file's),
 * --save-format hf without --save-model or with a classifier, and
 * --sample-prompt with --sample-tokens. The precedence of the
 * dist config: defaults < --config FILE < DTRAIN_* environment < flags. */
int dt_train_parse_args(dt_train_options *o, int argc, char **argv);
/* Usage text. */
const char *dt_train_usage(void);
/* sizeof(dt_train_options), for bindings that hold the options as an opaque
 * buffer (the Python front sets fields through dt_train_parse_args). */
size_t dt_train_options_size(void);
/* sizeof(dt_train_result), for bindings that mirror the struct (the Python
 * front checks its copy against it). */
size_t dt_train_result_size(void);

/* Build everything (loads data, creates model, optimizer, data parallelism)
 * over o->comm. Collective over the communicator. Every output path is
 * checked first, before anything is trained (rank 0: checkpoint_dir with
 * dt_ckpt_prepare, save_model with dt_st_writer_check, json_path opened,
 * tensorboard_dir created and its event file opened;
 * every rank: its timeline opened); a failure on any rank is returned on
 * every rank with that rank's message ("rank R: ..."). */
int dt_trainer_create(const dt_train_options *o, dt_trainer **out);
/* Train for o->epochs (or until max_steps); fills *res (may be NULL). At the
 * end (after the checkpoint and the model were saved) the JSON lines file, the
 * TensorBoard event file and the timeline are closed: a write of any that failed at any time (full
 * disk) makes it return DT_ERR_IO naming the file and the reason; training
 * itself is never stopped by a failed metrics write (reported once on stderr
 * when it happens). */
int dt_trainer_fit(dt_trainer *t, dt_train_result *res);
/* Evaluate on the evaluation set (classifiers: the test set; gpt: the
 * validation windows) split across ranks: accuracy in [0,1] (gpt: of the
 * next-byte predictions) and the mean loss per prediction (gpt: per token). */
int dt_trainer_evaluate(dt_trainer *t, double *acc, double *loss);
dt_model *dt_trainer_model(dt_trainer *t);
/* Copy the full parameter vector into dst (num_params floats) on the rank with
 * world rank `root`; collective (ZeRO-3 gathers it). */
int dt_trainer_gather_params(dt_trainer *t, float *dst, int root);
/* Print the memory accounting table (dtrain/mem.h) to f (rank 0 only). The
 * JSON lines file gets the same as {"type":"memory"} records by itself, at the
 * end of dt_trainer_create ("start") and of dt_trainer_fit ("end"). */
void dt_trainer_print_memory(dt_trainer *t, FILE *f, const char *when);
void dt_trainer_free(dt_trainer *t);
/* 1 when the last dt_trainer_create on this thread failed because the input
 * does not fit the flags: a model size that cannot be built, a data set that
 * cannot feed the model (an empty or too short text corpus, a block size
 * larger than a split, an epoch shorter than --accum-steps batches), a
 * checkpoint written for another model or size (--resume). dtrain-train
 * exits 2 for these, as for a bad flag; nothing was written (the output
 * paths are opened last). 0 otherwise. */
int dt_trainer_usage_error(void);

/* Consolidated model: parameters and batch-norm buffers by state_dict name in
 * the safetensors format, written by the rank with world rank 0 (ZeRO-3:
 * gathered to it one tensor at a time). Collective. The file appears
 * atomically (temporary name, fsync, rename); path must be a regular file, a
 * new one or a symbolic link to a regular file (dtrain/safetensors.h:
 * special files are refused with DT_ERR_INVALID). Its metadata: format
 * "pt", model, written_by "dtrain", step, and for gpt n_layer, n_head,
 * n_embd, block_size, vocab_size (so that --init-from needs no flag).
 * With the trainer's save_format "hf" (gpt only; DT_ERR_INVALID otherwise)
 * path is a directory (it must exist; dt_trainer_create makes it) that gets
 * model.safetensors in GPT2LMHeadModel's layout (dtrain/weights.h) and then
 * config.json, both written atomically. With "llmc" or "llmc-bf16" (gpt only)
 * path is a file in llm.c's model format (dtrain/weights.h: version 3,
 * float32, or 5, bfloat16), written atomically too. */
int dt_trainer_save_model(dt_trainer *t, const char *path);
/* Training-state checkpoint (dtrain/ckpt.h): a directory with a manifest and
 * one file per rank holding its partition [r*S, (r+1)*S) of the parameters and
 * of every optimizer state (S = ceil(P / N)), plus the buffers on rank 0; the
 * step, epoch and position in the epoch. Collective; crash-safe (the previous
 * checkpoint stays intact until the new one is complete). */
int dt_trainer_save_checkpoint(dt_trainer *t, const char *dir);
/* Load a checkpoint into a freshly created trainer (before dt_trainer_fit):
 * any world size and ZeRO level (the state is resharded); the same world size
 * and level continue bit-identically. The epoch continues at the checkpoint's
 * sample of its global order (metadata "epoch_position_unit": "samples") with
 * any world size, batch size or accumulation; a checkpoint without that
 * metadata (older dtrain) counted micro-batches of this run's batch size. Refuses a checkpoint of another model or
 * optimizer (DT_ERR_MISMATCH), a corrupted or truncated one (DT_ERR_IO, naming
 * the file), an unknown format version (DT_ERR_UNSUPPORTED). Collective. */
int dt_trainer_resume(dt_trainer *t, const char *dir);

/* Ask every trainer in this process to stop at the next step boundary.
 * Async-signal-safe: dtrain-train calls it from its SIGINT/SIGTERM handler.
 * The ranks agree on stopping (a one-element MAX allreduce per step), finish
 * the step under way, and dt_trainer_fit returns DT_ERR_STATE ("stopped by
 * request") with the result filled up to that step; nothing is half-written. */
void dt_trainer_request_stop(void);

#ifdef __cplusplus
}
#endif
#endif
