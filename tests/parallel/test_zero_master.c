/* ZeRO's mixed precision at stages 1 and 2 (dt_zero_config.params_bf16):
 * the f32 master parameters are ZeRO's shards, the caller keeps and computes
 * from a bf16 copy only. Host memory, at 1, 2 and 4 ranks, against the same
 * ZeRO without params_bf16 (its f32 working copy; the reference), AdamW with
 * weight decay, 3 steps, gradients that depend on the bf16 parameters (as a
 * model computing from them would) and on the rank, clipped by the global
 * norm:
 *   - create writes the whole bf16 copy: every element dt_f32_to_bf16 of
 *     rank 0's parameters (the other ranks start from other values);
 *   - the hooks hand out no parameter pointers (the copy is the caller's)
 *     and stage 1 still the full gradient buffer;
 *   - after each step the master slice is the reference's f32 slice, bit for
 *     bit, and once the hooks waited, every rank's bf16 copy is the rounding
 *     of the reference's full f32 vector, every element (the owners wrote
 *     and re-shared their slices); the caller's f32 vector was poisoned
 *     after create and is never read again;
 *   - dt_zero_gather_range gives the reference's f32 vector (from the
 *     owners' masters), on a root other than rank 0 too;
 *   - dt_zero_load_param_shard: a new slice on every rank becomes the master
 *     and, rounded, every rank's copy;
 *   - stage 3 with params_bf16: DT_ERR_INVALID naming it, *out NULL. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/dtrain.h"
#include "dtrain/zero.h"
#include "testutil.h"

#define NSEG 5
static const size_t g_cnt[NSEG] = {1001, 3, 0, 3999, 0};
static const int g_own[NSEG] = {0, 1, 2, 3, 0}; /* the last computes with segment 0's (a tied head) */

static float init_val(int rank, size_t k) { /* rank 0's are the ones everyone starts from */
    uint32_t h = (uint32_t)(k * 2654435761u) ^ (uint32_t)(rank * 40503);
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return ((float)(h % 20001) - 10000.0f) / 7919.0f;
}

static float grad_val(int rank, int step, size_t k, uint16_t pb) {
    return 0.25f * dt_bf16_to_f32(pb) + (float)((int)((k * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) - 8) / 16.0f;
}

/* every rank's copy is bf16(ref) for all P; the master slice the reference's */
static size_t copy_wrong(const uint16_t *p16, const float *ref, size_t P) {
    size_t bad = 0;
    for (size_t k = 0; k < P; k++) bad += p16[k] != dt_f32_to_bf16(ref[k]);
    return bad;
}

/* stage 3, gather_bf16: segment s's bf16 layer against the reference's f32
 * one (h), element by element; 0 when no layer was handed out */
static size_t layer_wrong(dt_zero *z, int s, const float *h) {
    const uint16_t *p16 = dt_zero_params_bf16(z, s);
    size_t n = g_cnt[g_own[s]], bad = 0;
    CHECK((p16 != NULL) == (n != 0), "segment %d: bf16 layer %p for %zu parameters", s, (const void *)p16, n);
    for (size_t i = 0; p16 && h && i < n; i++) bad += p16[i] != dt_f32_to_bf16(h[i]);
    return bad;
}

/* a forward's hooks on the reference zr and on zm: every segment's pending
 * broadcasts waited; *nonnull counts the f32 parameter pointers zm handed
 * out; stage 3 (gather_bf16): *bad counts zm's bf16 layer elements that are
 * not the reference's f32 rounded */
static void forward(dt_zero *zr, dt_zero *zm, int *nonnull, size_t *bad) {
    for (int s = 0; s < NSEG; s++) {
        float *p = (float *)&p, *h = NULL;
        CHECK_OK(dt_zero_pre_forward(zr, s, &h));
        CHECK_OK(dt_zero_pre_forward(zm, s, &p));
        *nonnull += p != NULL;
        if (bad) *bad += layer_wrong(zm, s, h);
        CHECK_OK(dt_zero_post_forward(zr, s));
        CHECK_OK(dt_zero_post_forward(zm, s));
    }
}

static void one(dt_comm *w, int stage) {
    const int rank = dt_comm_rank(w), N = dt_comm_size(w);
    size_t off[NSEG], P = 0;
    for (int s = 0; s < NSEG; s++) { off[s] = P; P += g_cnt[s]; }
    float *pr = malloc(P * sizeof(float)), *pm = malloc(P * sizeof(float));
    float *gr = calloc(P, sizeof(float)), *gm = calloc(P, sizeof(float)), *all = malloc(P * sizeof(float));
    uint16_t *p16 = malloc(P * sizeof(uint16_t)), *l16 = malloc(P * sizeof(uint16_t));
    for (size_t k = 0; k < P; k++) pr[k] = pm[k] = init_val(rank, k), p16[k] = 0xffff;
    dt_zero_config zc;
    dt_zero_config_default(&zc);
    zc.stage = stage;
    zc.bucket_cap_bytes = 2048; /* several re-sharing chunks per owner */
    zc.seg_owner = g_own;
    dt_optim_config oc;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_ADAMW));
    oc.lr = 0.01f;
    oc.weight_decay = 0.1f;
    dt_zero *zr = NULL, *zm = NULL;
    CHECK_OK(dt_zero_create(w, &zc, P, off, g_cnt, NSEG, pr, stage == 1 ? gr : NULL, &oc, &zr));
    if (stage < 3) zc.params_bf16 = p16;
    else zc.gather_bf16 = 1;
    CHECK_OK(dt_zero_create(w, &zc, P, off, g_cnt, NSEG, pm, stage == 1 ? gm : NULL, &oc, &zm));
    if (!zr || !zm) goto out;
    for (size_t k = 0; k < P; k++) pm[k] = NAN; /* released: never read again */
    size_t lo, hi, bad = 0, bad3 = 0;
    CHECK_OK(dt_zero_shard(zm, &lo, &hi));
    if (stage < 3) bad = copy_wrong(p16, pr, P);
    CHECK(bad == 0, "stage %d at %d ranks: %zu elements of the bf16 copy after create are not rank 0's rounded", stage, N,
          bad);
    for (int step = 0; step < 3; step++) {
        int nm = 0;
        CHECK_OK(dt_zero_begin_step(zr, 1));
        CHECK_OK(dt_zero_begin_step(zm, 1));
        forward(zr, zm, &nm, stage == 3 ? &bad3 : NULL);
        CHECK(nm == 0, "stage %d step %d: %d f32 parameter pointers handed out in bf16 (want 0)", stage, step, nm);
        if (stage < 3) bad = copy_wrong(p16, pr, P);
        CHECK(bad == 0, "stage %d at %d ranks, step %d: %zu elements of rank %d's bf16 copy are not the reference's "
              "f32 rounded", stage, N, step, bad, rank);
        for (int s = NSEG - 1; s >= 0; s--) {
            float *h, *p, *gR, *gM;
            CHECK_OK(dt_zero_pre_backward(zr, s, &h, &gR));
            CHECK_OK(dt_zero_pre_backward(zm, s, &p, &gM));
            const int o = g_own[s];
            CHECK(p == NULL && (gM != NULL) == (g_cnt[o] != 0), "stage %d segment %d: pre_backward's params %p, grads "
                  "%p", stage, s, (void *)p, (void *)gM);
            /* the bf16 values the model computes with: the copy, or stage 3's gathered layer */
            const uint16_t *w16 = stage < 3 ? p16 + off[o] : dt_zero_params_bf16(zm, s);
            if (stage == 3) bad3 += layer_wrong(zm, s, h);
            for (size_t i = 0; gR && gM && w16 && i < g_cnt[o]; i++) {
                float gv = grad_val(rank, step, off[o] + i, w16[i]);
                gR[i] += gv, gM[i] += gv; /* the tied segment adds to its owner's */
            }
            CHECK_OK(dt_zero_grad_ready(zr, s));
            CHECK_OK(dt_zero_grad_ready(zm, s));
            CHECK_OK(dt_zero_post_backward(zr, s));
            CHECK_OK(dt_zero_post_backward(zm, s));
        }
        CHECK_OK(dt_zero_finish(zr));
        CHECK_OK(dt_zero_finish(zm));
        double nr2 = -1, nm2 = -2;
        CHECK_OK(dt_zero_step(zr, 0.01f, 1.0, &nr2));
        CHECK_OK(dt_zero_step(zm, 0.01f, 1.0, &nm2));
        CHECK(memcmp(&nr2, &nm2, sizeof nr2) == 0, "stage %d step %d: gradient norm %.17g, the reference's %.17g", stage,
              step, nm2, nr2);
        CHECK(memcmp(dt_zero_param_shard(zm), dt_zero_param_shard(zr), (hi - lo) * sizeof(float)) == 0,
              "stage %d at %d ranks, step %d: rank %d's master slice is not the reference's f32", stage, N, step, rank);
        if (stage == 1) memset(gr, 0, P * sizeof(float)), memset(gm, 0, P * sizeof(float));
    }
    CHECK(bad3 == 0, "stage 3 at %d ranks: %zu elements of the bf16 layers gathered are not the reference's f32 "
          "rounded", N, bad3);
    int nm = 0;
    forward(zr, zm, &nm, stage == 3 ? &bad3 : NULL);
    if (stage < 3) bad = copy_wrong(p16, pr, P); /* pr: the reference's working copy, waited for */
    CHECK(bad == 0 && bad3 == 0, "stage %d at %d ranks, after 3 steps: %zu elements of rank %d's bf16 copy (%zu of "
          "the layers) are not the reference's f32 rounded", stage, N, bad, rank, bad3);
    /* the f32 vector from the owners' masters, on the last rank */
    const int root = dt_comm_world_rank_of(w, N - 1);
    for (size_t k = 0; k < P; k++) all[k] = NAN;
    CHECK_OK(dt_zero_gather_range(zr, 0, P, rank == N - 1 ? pr : NULL, root));
    CHECK_OK(dt_zero_gather_range(zm, 0, P, rank == N - 1 ? all : NULL, root));
    if (rank == N - 1)
        CHECK(memcmp(all, pr, P * sizeof(float)) == 0, "stage %d at %d ranks: the gathered vector is not the "
              "reference's f32", stage, N);
    /* a loaded slice: the master, and rounded every rank's copy (stage 3: the next gathers) */
    float *slice = malloc((hi - lo + 1) * sizeof(float));
    for (size_t k = lo; k < hi; k++) slice[k - lo] = init_val(7, k);
    CHECK_OK(dt_zero_load_param_shard(zm, slice));
    for (size_t k = 0; k < P; k++) pr[k] = init_val(7, k); /* every rank loaded its slice of these */
    if (stage < 3) {
        int nn = 0;
        for (int s = 0; s < NSEG; s++) { /* the hooks wait for the re-shared copy */
            float *p;
            CHECK_OK(dt_zero_pre_forward(zm, s, &p));
            nn += p != NULL;
        }
        bad = copy_wrong(p16, pr, P) + (size_t)nn;
    } else {
        for (int s = 0; s < NSEG; s++) {
            float *p;
            CHECK_OK(dt_zero_pre_forward(zm, s, &p));
            const uint16_t *w16 = dt_zero_params_bf16(zm, s);
            for (size_t i = 0; w16 && i < g_cnt[g_own[s]]; i++) l16[off[g_own[s]] + i] = w16[i];
            CHECK_OK(dt_zero_post_forward(zm, s));
        }
        bad = copy_wrong(l16, pr, P);
    }
    CHECK(bad == 0, "stage %d at %d ranks: after dt_zero_load_param_shard %zu elements of rank %d's bf16 parameters are "
          "not the loaded values rounded", stage, N, bad, rank);
    CHECK(memcmp(dt_zero_param_shard(zm), slice, (hi - lo) * sizeof(float)) == 0, "stage %d: the loaded slice is not "
          "the master", stage);
    free(slice);
    if (rank == 0)
        printf("zero stage %d at %d ranks, %s: the reference's steps, bf16 parameters and gathers\n", stage, N,
               stage < 3 ? "params_bf16" : "gather_bf16");
    dt_test_passed++;
out:
    dt_zero_free(zr);
    dt_zero_free(zm);
    free(pr), free(pm), free(gr), free(gm), free(all), free(p16), free(l16);
}

int main(void) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    dt_test_rank = dt_comm_rank(w);
    one(w, 1);
    one(w, 2);
    one(w, 3);
    /* stage 3 gathers layers: no bf16 copy to write; stages 1/2 have no gathers */
    size_t off[1] = {0}, cnt[1] = {8};
    float p[8] = {0};
    uint16_t c[8];
    dt_zero_config zc;
    dt_zero_config_default(&zc);
    zc.stage = 3;
    zc.params_bf16 = c;
    dt_optim_config oc;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_SGD));
    dt_zero *z = (dt_zero *)&zc;
    CHECK_ERR(dt_zero_create(w, &zc, 8, off, cnt, 1, p, NULL, &oc, &z), DT_ERR_INVALID, "cfg.params_bf16 with stage 3");
    CHECK(z == NULL, "a refused dt_zero_create leaves *out NULL");
    zc.params_bf16 = NULL;
    zc.stage = 2;
    zc.gather_bf16 = 1;
    z = (dt_zero *)&zc;
    CHECK_ERR(dt_zero_create(w, &zc, 8, off, cnt, 1, p, NULL, &oc, &z), DT_ERR_INVALID, "gather_bf16 1 with stage 1 or 2");
    CHECK(z == NULL, "a refused dt_zero_create leaves *out NULL");
    zc.stage = 3;
    zc.gather_bf16 = 2;
    CHECK_ERR(dt_zero_create(w, &zc, 8, off, cnt, 1, p, NULL, &oc, &z), DT_ERR_INVALID, "a value other than 0 or 1");
    CHECK(dt_zero_params_bf16(NULL, 0) == NULL, "dt_zero_params_bf16(NULL)");
    CHECK_OK(dt_finalize());
    return dt_test_finish("parallel_zero_master");
}
