/* tests/fuzz/fuzz_train_args.c - the trainer's flag parser (dt_train_parse_args).
 *
 * Input: arguments separated by '\n' (at most 64), after argv[0] =
 * "dtrain-train". Inputs that would print (--help, -h) or touch files
 * (--dump-config writes one; --config reads any path, e.g. a FIFO that blocks)
 * are skipped. The DTRAIN_* environment is cleared once at start-up.
 * Properties: DT_OK or DT_ERR_INVALID/DT_ERR_IO with a message; on DT_OK the
 * options are in their documented ranges. */
#define _DEFAULT_SOURCE
#include <string.h>
#include <stdlib.h>
#include "dtrain/status.h"
#include "dtrain/model.h"
#include "dtrain/train.h"
#include "fuzz_common.h"

extern char **environ;

static void clear_env(void) {
    static int done;
    if (done) return;
    done = 1;
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "DTRAIN_", 7) == 0) {
                char name[128];
                size_t l = strcspn(*e, "=");
                if (l >= sizeof name) continue;
                memcpy(name, *e, l);
                name[l] = '\0';
                unsetenv(name);
                again = 1;
                break;
            }
    }
}

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clear_env();
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "dtrain-train";
    char *p = buf;
    while (argc <= MAX_ARGS) {
        argv[argc++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") || !strncmp(argv[i], "--config", 8) ||
            !strncmp(argv[i], "--dump-config", 13)) {
            free(buf);
            return 0;
        }
    }
    /* exact-size copies of the arguments, so that reading past one is caught */
    char *args[MAX_ARGS + 2];
    args[0] = argv[0];
    for (int i = 1; i < argc; i++) args[i] = strdup(argv[i]);
    args[argc] = NULL;
    dt_train_options o;
    dt_train_options_default(&o);
    dt_clear_error();
    int rc = dt_train_parse_args(&o, argc, args);
    if (rc != DT_OK) {
        FUZZ_CHECK(rc == DT_ERR_INVALID || rc == DT_ERR_IO, "status %d (%s)", rc, dt_last_error());
        FUZZ_CHECK(dt_last_error()[0], "failure without a message");
    } else {
        FUZZ_CHECK(o.epochs >= 1 && o.batch_size >= 1 && o.accum_steps >= 1 && o.threads >= 1, "ranges");
        FUZZ_CHECK(o.lr >= 0 && o.momentum >= 0 && o.momentum < 1, "lr %g momentum %g", o.lr, o.momentum);
        FUZZ_CHECK(memchr(o.model, 0, sizeof o.model) && memchr(o.data_dir, 0, sizeof o.data_dir) &&
                   memchr(o.json_path, 0, sizeof o.json_path) && memchr(o.timeline_path, 0, sizeof o.timeline_path) &&
                   memchr(o.preset, 0, sizeof o.preset) && memchr(o.sample_prompt, 0, sizeof o.sample_prompt),
                   "unterminated string option");
        FUZZ_CHECK(!strcmp(o.model, "mlp") || !strcmp(o.model, "lenet") || !strcmp(o.model, "cnn") ||
                   !strcmp(o.model, "gpt"), "model %s", o.model);
        FUZZ_CHECK(o.n_layer >= 0 && o.n_head >= 0 && o.n_embd >= 0 && o.block_size >= 0 && o.seq_len >= 0 &&
                   (o.recompute == 0 || o.recompute == 1) && o.sample_length >= 0 && o.sample_temperature >= 0,
                   "gpt sizes");
        /* with --init-from the file gives the sizes: dt_trainer_create checks them */
        FUZZ_CHECK(!o.n_head || !o.n_embd || o.n_embd % o.n_head == 0 || o.init_from[0], "n_embd %d, n_head %d",
                   o.n_embd, o.n_head);
        /* a window fits the block size (the flag's or the preset's; with --init-from, the file's) */
        dt_model_config pc;
        FUZZ_CHECK(!o.seq_len || o.init_from[0] ||
                       (!dt_model_config_default(&pc, o.preset[0] ? o.preset : "gpt") &&
                        o.seq_len <= (o.block_size ? o.block_size : pc.block_size)),
                   "seq_len %d, block_size %d", o.seq_len, o.block_size);
        FUZZ_CHECK(o.dist.zero_opt_level >= 0 && o.dist.zero_opt_level <= 3, "zero");
    }
    for (int i = 1; i < argc; i++) free(args[i]);
    free(buf);
    return 0;
}
