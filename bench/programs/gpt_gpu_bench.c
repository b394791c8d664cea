/* bench/programs/gpt_gpu_bench.c - a GPT's training step on a CUDA device:
 * forward, backward, then the optimizer (global gradient norm, clipping to
 * 1.0, AdamW, zero_grad), on random tokens. Not a test: prints numbers,
 * asserts nothing (bench/README.md, the GPU suite's GPT benchmark).
 *
 *   gpt_gpu_bench [--preset gpt2-124m] [--vocab 50257] [--batch 16]
 *                 [--steps 20] [--warmup 3] [--precision bf16|fp32]
 *                 [--recompute 0|1] [--device cpu|cuda]
 *
 * Times are wall clock between synchronising calls (the loss read waits
 * for forward and backward; the gradient norm waits for the gradients; a
 * one-value copy waits for the update), medians over the steps after the
 * warm-up. The optimizer part is timed on its own from an idle device: the
 * norm over all P gradients, the clip, AdamW over P parameters, zero_grad.
 * FLOPs per token: 6P + 12 L C T (PaLM's count, as llm.c and nanoGPT's MFU).
 * MFU is against dtrain/device.h's peak of the GPU for the precision. Peak
 * device memory: total minus the least free memory seen (cudaMemGetInfo)
 * minus what was in use before the model was made. Last line: one JSON
 * object with every figure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/device.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "dtrain/status.h"
#include "step_clock.h"

static unsigned long long g_used0, g_peak;

/* device memory in use now above what was in use at the start; kept at its peak */
static void sample_memory(int device) {
    dt_cuda_info in;
    if (device != DT_DEVICE_CUDA || dt_cuda_device_info(-1, &in)) return;
    unsigned long long used = in.total_bytes - in.free_bytes;
    if (used > g_used0 && used - g_used0 > g_peak) g_peak = used - g_used0;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}

int main(int argc, char **argv) {
    const char *preset = "gpt2-124m", *prec = "bf16", *dev = "cuda";
    int vocab = 50257, B = 16, steps = 20, warm = 3, recompute = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (!strcmp(f, "--preset")) preset = v;
        else if (!strcmp(f, "--vocab")) vocab = atoi(v);
        else if (!strcmp(f, "--batch")) B = atoi(v);
        else if (!strcmp(f, "--steps")) steps = atoi(v);
        else if (!strcmp(f, "--warmup")) warm = atoi(v);
        else if (!strcmp(f, "--precision")) prec = v;
        else if (!strcmp(f, "--recompute")) recompute = atoi(v);
        else if (!strcmp(f, "--device")) dev = v;
        else {
            fprintf(stderr, "gpt_gpu_bench: unknown flag %s\n", f);
            return 2;
        }
    }
    if (steps < 1 || B < 1 || warm < 0) {
        fprintf(stderr, "gpt_gpu_bench: --steps and --batch must be >= 1, --warmup >= 0\n");
        return 2;
    }
    dt_model_config cfg;
    dt_model *m = NULL;
    int rc = dt_model_config_default(&cfg, preset);
    if (!rc) rc = dt_device_kind_parse(dev, &cfg.device);
    if (!rc) rc = dt_precision_parse(prec, &cfg.precision);
    dt_cuda_info info = {.name = "cpu"};
    if (!rc && cfg.device == DT_DEVICE_CUDA && !(rc = dt_cuda_use_device(0)) && !(rc = dt_cuda_device_info(0, &info)))
        g_used0 = info.total_bytes - info.free_bytes;
    cfg.vocab_size = vocab, cfg.recompute = recompute;
    if (!rc) rc = dt_model_create(&cfg, &m);
    if (rc) {
        fprintf(stderr, "gpt_gpu_bench: %s\n", dt_last_error());
        return 1;
    }
    const int T = cfg.block_size;
    const size_t P = dt_model_num_params(m), n = (size_t)B * (size_t)T;
    int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
    double *ts = malloc(sizeof(double) * (size_t)steps), *tfb = malloc(sizeof(double) * (size_t)steps);
    double *to = malloc(sizeof(double) * (size_t)steps);
    dt_rng r;
    dt_rng_seed(&r, 1);
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)dt_rng_below(&r, (uint64_t)vocab);
    for (size_t i = 0; i < n; i++) y[i] = i + 1 < n ? x[i + 1] : x[0];
    dt_optim_config oc;
    dt_optim *opt = NULL;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    oc.lr = 6e-4, oc.weight_decay = 0.1, oc.beta2 = 0.95;
    if ((rc = dt_optim_create_on(&oc, P, cfg.device, dt_model_stream(m), &opt))) {
        fprintf(stderr, "gpt_gpu_bench: %s\n", dt_last_error());
        return 1;
    }
    float loss = 0, first = 0, one;
    int done = 0;
    for (int it = -warm; it < steps && !rc; it++) {
        double t0 = now();
        rc = dt_model_forward(m, x, y, B, 1, NULL);
        if (!rc) rc = dt_model_backward(m);
        if (!rc) rc = dt_model_loss(m, &loss); /* waits for forward and backward */
        sample_memory(cfg.device);
        double t1 = now(), sq = 0;
        if (!rc) rc = dt_optim_grad_sqnorm(opt, dt_model_grads(m), P, &sq); /* waits */
        const double norm = sqrt(sq);
        if (!rc && norm > 1.0) rc = dt_optim_grad_scale(opt, dt_model_grads(m), P, (float)(1.0 / (norm + 1e-6)));
        if (!rc) rc = dt_optim_step(opt, dt_model_params(m), dt_model_grads(m), 6e-4f);
        if (!rc) dt_model_zero_grad(m);
        if (!rc) rc = dt_model_copy_to_host(m, &one, dt_model_params(m), 1); /* waits for the update */
        double t2 = now();
        if (it == -warm) first = loss;
        if (it >= 0 && !rc) {
            ts[it] = t2 - t0;
            tfb[it] = t1 - t0;
            to[it] = t2 - t1;
            done++;
        }
    }
    if (rc || done < steps) {
        fprintf(stderr, "gpt_gpu_bench: step failed: %s\n", dt_last_error());
        return 1;
    }
    const double step = median(ts, steps), fb = median(tfb, steps), os = median(to, steps);
    const double fpt = 6.0 * (double)P + 12.0 * cfg.n_layer * (double)cfg.n_embd * T;
    const double tps = (double)n / step, peak = dt_cuda_peak_tflops(&info, cfg.precision);
    const double mfu = peak > 0 ? fpt * tps / (peak * 1e12) : -1;
    size_t act = 0;
    dt_model_activation_bytes(m, B, T, recompute, &act);
    printf("dtrain %s on %s (%s), %s, B=%d T=%d V=%d (padded inside), recompute %d: %zu parameters\n", preset,
           info.name, dev, prec, B, T, vocab, recompute, P);
    printf("  loss %.4f -> %.4f over %d steps (random tokens)\n", first, loss, warm + steps);
    printf("  step %.2f ms (forward+backward %.2f, clip+AdamW+zero_grad %.3f): %.0f tokens/s, %.1f TFLOP/s, MFU %s\n",
           1e3 * step, 1e3 * fb, 1e3 * os, tps, fpt * tps / 1e12, mfu >= 0 ? "" : "n/a (unknown peak)");
    if (mfu >= 0) printf("  MFU %.1f%% of %.1f TFLOP/s\n", 100 * mfu, peak);
    printf("  device memory: peak %.2f GB above the start; activations %.2f GB, parameters+gradients+AdamW %.2f GB "
           "(+ %s)\n", (double)g_peak / 1e9, (double)act / 1e9, 16.0 * (double)P / 1e9,
           cfg.precision == DT_PRECISION_BF16 ? "bf16 copy 2P" : "nothing");
    printf("{\"bench\":\"gpt_gpu\",\"device\":\"%s\",\"gpu\":\"%s\",\"precision\":\"%s\",\"preset\":\"%s\",\"B\":%d,"
           "\"T\":%d,\"V\":%d,\"params\":%zu,\"step_ms\":%.3f,\"fwd_bwd_ms\":%.3f,\"optim_ms\":%.4f,"
           "\"tokens_per_s\":%.1f,\"mfu\":%.4f,\"peak_tflops\":%.1f,\"peak_mem_gb\":%.3f,\"act_gb\":%.3f,"
           "\"loss_first\":%.5f,\"loss_last\":%.5f}\n",
           dev, info.name, prec, preset, B, T, vocab, P, 1e3 * step, 1e3 * fb, 1e3 * os, tps, mfu, peak,
           (double)g_peak / 1e9, (double)act / 1e9, first, loss);
    dt_optim_free(opt);
    dt_model_free(m);
    free(x), free(y), free(ts), free(tfb), free(to);
    return 0;
}
