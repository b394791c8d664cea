/* dtrain-train: train a classifier on Fashion-MNIST or a GPT on text, single
 * process or data parallel under mpirun. Exit codes: 0 ok, 1 runtime error,
 * 2 usage error (a bad flag, config file or DTRAIN_* environment value, or
 * input that does not fit the flags: dt_trainer_usage_error). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/dtrain.h"
#include "dtrain/train.h"

static void on_signal(int sig) {
    (void)sig;
    dt_trainer_request_stop(); /* the ranks stop together at the next step boundary */
}

int main(int argc, char **argv) {
    dt_train_options o;
    dt_train_options_default(&o);
    int rc = dt_train_parse_args(&o, argc, argv);
    if (rc == 1) return 0;
    if (rc) {
        /* the usage text for what is wrong with the flags; a file that
         * cannot be read (--config) or written (--dump-config) is named
         * with the reason alone */
        fprintf(stderr, "dtrain-train: %s\n%s", dt_last_error(), rc == DT_ERR_INVALID ? dt_train_usage() : "");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* --device cuda: each rank's GPU is local_rank % the devices it sees, made
     * current by dt_init before it creates the NCCL communicator on it (unless
     * DTRAIN_CUDA_DEVICE says otherwise) */
    if (strcmp(o.device, "cuda") == 0) setenv("DTRAIN_CUDA_DEVICE", "local", 0);
    if ((rc = dt_init())) {
        /* DT_ERR_INVALID / DT_ERR_UNSUPPORTED: a malformed DTRAIN_* setting
         * (DTRAIN_SHM_*, DTRAIN_CHECK_*, DTRAIN_TIMEOUT, DTRAIN_BACKEND): a
         * usage error like a bad flag, nothing was started */
        int usage = rc == DT_ERR_INVALID || rc == DT_ERR_UNSUPPORTED;
        fprintf(stderr, "dtrain-train: %s\n", dt_last_error());
        return usage ? 2 : 1;
    }
    dt_comm_info ci;
    dt_comm_info_get(dt_comm_world(), &ci);
    dt_trainer *t = NULL;
    rc = dt_trainer_create(&o, &t);
    if (!rc && ci.rank == 0 && !o.quiet) {
        char cfg[1024];
        dt_config_to_json(&o.dist, cfg, sizeof cfg);
        dt_model *m = dt_trainer_model(t);
        const char *dp = dt_comm_device_path(dt_comm_world());
        printf("dtrain-train: model %s (%zu parameters), %d rank(s) [%s%s%s], batch %d per rank (global %d), "
               "optimizer %s, %d epoch(s), seed %llu\ndist config: %s\n",
               dt_model_name(m), dt_model_num_params(m), ci.size, dt_comm_backend(dt_comm_world()),
               strcmp(dp, "none") ? ", device memory: " : "", strcmp(dp, "none") ? dp : "", o.batch_size,
               o.batch_size * ci.size * o.accum_steps, o.optimizer, o.epochs, (unsigned long long)o.seed, cfg);
        const dt_model_config *mc = dt_model_get_config(m);
        if (mc && mc->n_layer > 0)
            printf("gpt: %d layers, %d heads, width %d, block size %d, vocabulary %d (%s), recompute %d; "
                   "windows of %d tokens, a step trains %d tokens\n", mc->n_layer, mc->n_head, mc->n_embd,
                   mc->block_size, mc->vocab_size, mc->vocab_size == 256 ? "bytes" : "tokens", mc->recompute,
                   dt_model_forward_len(m), o.batch_size * ci.size * o.accum_steps * dt_model_forward_len(m));
        fflush(stdout);
    }
    if (!rc && !o.quiet) dt_trainer_print_memory(t, stdout, "start");
    dt_train_result r;
    if (!rc) rc = dt_trainer_fit(t, &r);
    if (!rc && !o.quiet) dt_trainer_print_memory(t, stdout, "end");
    const int usage = rc && dt_trainer_usage_error(); /* before anything else can fail */
    const dt_model_config *mc = rc ? NULL : dt_model_get_config(dt_trainer_model(t));
    const int gpt = mc && mc->n_layer > 0;
    const char *unit = gpt && mc->vocab_size == 256 ? "byte" : "token";
    if (!rc && ci.rank == 0 && !o.quiet && o.max_steps == 0) {
        /* inference: the evaluation and the sample of the model as loaded */
        printf("done: no training step (--max-steps 0)");
        if (r.test_acc >= 0 && gpt)
            printf(", validation loss %.4f (%.3f bits/%s), accuracy %.2f%%", r.test_loss, r.test_loss / 0.6931471805599453,
                   unit, 100 * r.test_acc);
        else if (r.test_acc >= 0)
            printf(", test loss %.4f, test acc %.2f%%", r.test_loss, 100 * r.test_acc);
        printf("\n");
    } else if (!rc && ci.rank == 0 && !o.quiet && r.epochs == 0) {
        /* resumed from a checkpoint that is already where the flags end */
        printf("done: nothing to train: the run is already at step %ld (--epochs %d", r.steps, o.epochs);
        if (o.max_steps > 0) printf(", --max-steps %ld", o.max_steps);
        printf(" reached); raise --epochs or --max-steps to train further\n");
    } else if (!rc && ci.rank == 0 && !o.quiet) {
        if (gpt) {
            printf("done: %ld steps, final train loss %.4f per token%s, %.0f tokens/s", r.steps, r.last_loss,
                   mc->vocab_size == 256 ? " (= per byte)" : "", r.tokens_per_s);
            if (r.test_acc >= 0)
                printf(", validation loss %.4f (%.3f bits/%s)", r.test_loss, r.test_loss / 0.6931471805599453, unit);
        } else {
            printf("done: %ld steps, final train loss %.4f, train acc %.2f%%", r.steps, r.last_loss, 100 * r.train_acc);
            if (r.test_acc >= 0) printf(", test acc %.2f%%", 100 * r.test_acc);
        }
        printf(", median step %.2f ms", 1e3 * r.median_step_s);
        if (r.comm_hidden >= 0)
            printf(", communication hidden behind backward %.0f%% (behind backward or optimizer %.0f%%)",
                   100 * r.comm_hidden, 100 * r.comm_hidden_compute);
        printf("\n");
    }
    if (rc) fprintf(stderr, "dtrain-train[rank %d]: %s\n", ci.rank, dt_last_error());
    dt_trainer_free(t);
    dt_finalize();
    return rc ? (usage ? 2 : 1) : 0; /* a stop by signal also exits 1: the run did not complete */
}
