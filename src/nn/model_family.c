/* src/nn/model_family.c - the table of model families. A new family is its
 * own file(s) defining a dtm_family (model_internal.h) plus one entry
 * here. */
#include <stdio.h>
#include <string.h>
#include "nn/model_internal.h"

static const dtm_family *const k_families[] = {
    &dt_family_sequential,
    &dt_family_gpt,
};
#define NFAM ((int)(sizeof k_families / sizeof k_families[0]))

const dtm_family *dtm_family_of(const char *model_name) {
    if (!model_name) return NULL;
    for (int f = 0; f < NFAM; f++)
        for (const char *const *n = k_families[f]->models; *n; n++)
            if (strcmp(*n, model_name) == 0) return k_families[f];
    return NULL;
}

void dtm_known_models(char *buf, size_t n) {
    size_t len = 0;
    if (!n) return;
    buf[0] = '\0';
    for (int f = 0; f < NFAM; f++)
        for (const char *const *nm = k_families[f]->models; *nm; nm++) {
            int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", *nm);
            if (w < 0 || (size_t)w >= n - len) return;
            len += (size_t)w;
        }
}
