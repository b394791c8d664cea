/* src/train/train_sample.c - the end-of-run sample of a generative model
 * (gpt): the parameters gathered to rank 0, which continues the prompt and
 * shows the result: text for a byte vocabulary, token ids otherwise (a
 * vocabulary of GPT-2's 50257 tokens has no text without a tokenizer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "core/error.h"
#include "dtrain/coll.h"
#include "train/trainer_internal.h"

/* bytes as text; control bytes other than newline and tab shown as '?' (the
 * JSON record has every byte) */
static void put_bytes(const int32_t *tok, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)tok[i];
        putchar((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : c);
    }
}

static void put_ids(const int32_t *tok, int n) {
    for (int i = 0; i < n; i++) printf("%s%d", i == 0 ? "" : i % 20 == 0 ? "\n" : " ", tok[i]);
}

/* The prompt: --sample-tokens; else the text (bytes; an empty one is a
 * newline); else the last token of the vocabulary (GPT-2's <|endoftext|>,
 * where llm.c starts its samples). *prompt is malloc'd. */
static int make_prompt(const dt_trainer *t, int32_t **prompt, int *plen) {
    const dt_train_options *o = &t->o;
    const int bytes = t->io.num_classes == 256, tl = (int)strlen(o->sample_prompt);
    int n = o->sample_ntokens ? o->sample_ntokens : bytes ? (tl ? tl : 1) : 1;
    int32_t *p = malloc(sizeof(int32_t) * (size_t)n);
    if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory for the sample");
    for (int i = 0; i < n; i++)
        p[i] = o->sample_ntokens ? o->sample_tokens[i]
             : bytes ? (tl ? (unsigned char)o->sample_prompt[i] : '\n')
             : t->io.num_classes - 1;
    *prompt = p;
    *plen = n;
    return DT_OK;
}

int dt_trainer_sample(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    if (t->io.max_seq < 1 || o->sample_length < 1) return DT_OK;
    const int root = dt_comm_world_rank_of(t->comm, 0), me = t->ci.rank == 0, L = t->table.nlayers;
    const size_t P = dt_model_num_params(t->model);
    float *full = me ? malloc(P * sizeof(float)) : NULL;
    int rc = me && !full ? DT_ERR(DT_ERR_NOMEM, "out of memory for the sample's parameters") : DT_OK;
    rc = dt_trainer_agree_error(t, rc);
    if (!rc) rc = dt_strategy_gather(t->st, 0, P, full, root);
    if (rc || !me) {
        free(full);
        return rc;
    }
    const int n = o->sample_length, bytes = t->io.num_classes == 256;
    int32_t *prompt = NULL, *outb = malloc(sizeof(int32_t) * (size_t)n);
    int plen = 0;
    rc = outb ? make_prompt(t, &prompt, &plen) : DT_ERR(DT_ERR_NOMEM, "out of memory for the sample");
    /* every layer reads the full copy while generating (a device model: a
     * copy in its memory), then its pointer is the strategy's again (set by
     * the hooks of the next pass) */
    float *resident = full;
    if (!rc && dt_model_device(t->model) != DT_DEVICE_CPU) {
        resident = NULL;
        rc = dt_dev()->dev_alloc(P * sizeof(float), (void **)&resident);
        if (!rc) rc = dt_model_copy_from_host(t->model, resident, full, P);
        if (rc) {
            char why[512];
            snprintf(why, sizeof why, "%s", dt_last_error());
            rc = dt_error(rc, "dtrain-train", "the sample's parameters on the device: %s", why);
        }
    }
    for (int l = 0; !rc && l < L; l++)
        if (t->l_cnt[l]) rc = dt_model_set_layer_params(t->model, l, resident + t->l_off[l]);
    if (!rc) rc = dt_model_generate(t->model, prompt, plen, n, (float)o->sample_temperature, o->seed, outb);
    for (int l = 0; l < L; l++)
        if (t->l_cnt[l]) dt_model_set_layer_params(t->model, l, NULL);
    if (resident && resident != full) dt_dev()->dev_free(resident);
    if (!rc && !o->quiet) {
        if (bytes) {
            printf("sample (prompt \"");
            put_bytes(prompt, plen);
            printf("\", temperature %g, %d bytes, seed %llu):\n", o->sample_temperature, n,
                   (unsigned long long)o->seed);
            put_bytes(prompt, plen);
            put_bytes(outb, n);
        } else {
            printf("sample (prompt tokens [");
            put_ids(prompt, plen < 16 ? plen : 16);
            printf("%s], temperature %g, %d tokens, seed %llu; token ids: a vocabulary of %d is not bytes and dtrain "
                   "has no tokenizer):\n", plen > 16 ? " ..." : "", o->sample_temperature, n,
                   (unsigned long long)o->seed, t->io.num_classes);
            put_ids(outb, n);
        }
        printf("\n");
        fflush(stdout);
    }
    if (!rc) dt_metrics_sample(&t->metrics, t->step, o->sample_temperature, prompt, (size_t)plen, outb, (size_t)n, bytes);
    free(prompt);
    free(outb);
    free(full);
    return rc;
}
