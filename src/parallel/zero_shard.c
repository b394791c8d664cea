/* src/parallel/zero_shard.c - this rank's ZeRO shard (dtrain/zero.h): where
 * its parameter and gradient slices and the optimizer's state live (host
 * memory; device memory stepped by the device optimizer; or, with
 * cfg.offload, the host beside device parameters), the layer gradients'
 * pieces reduced into it, the step (the sum across replicas, averaging, the
 * global norm and clipping, the update), the re-sharing of the updated
 * slices, gathering for checkpoints and loading a slice.
 *
 * On the device (ZW_DEVICE) nothing of the shard crosses to the host: the
 * gradient pieces are added into the device shard (dt_optim_grad_add) and
 * reduced there in place, the norm, the scaling and the update are the
 * device optimizer's kernels on cfg.stream (the host's arithmetic), and the
 * re-sharing broadcasts from the device. The host path's order of
 * operations is the same everywhere, so that device and host give the same
 * bits (the squared norm aside: a different order of double additions). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "core/error.h"
#include "parallel/zero_internal.h"

static float *dev_alloc(size_t n) {
    void *p = NULL;
    return dt_dev()->dev_alloc(sizeof(float) * (n ? n : 1), &p) ? NULL : p;
}

int zero_shard_create(dt_zero *z, float *params, float *grads, const dt_optim_config *ocfg) {
    const size_t n = z->hi - z->lo;
    const int stage = z->cfg.stage;
    int rc = DT_OK;
    if (z->where == ZW_DEVICE) {
        if (stage == 3 || z->p16) { /* the slice is the only f32 copy: the gathers' source, or the master */
            if (!(z->p_shard = dev_alloc(n)))
                return DT_ERR(DT_ERR_NOMEM, "out of device memory for the parameter shard (%zu floats)", n);
            z->own_p = 1;
            zero_mem(DT_MEM_PARAMS, n, 1, 1);
            if ((rc = zero_dcopy(z, z->p_shard, params + z->lo, n))) return rc;
        } else {
            z->p_shard = params + z->lo;
        }
        if (stage >= 2) {
            if (!(z->g_shard = dev_alloc(n)))
                return DT_ERR(DT_ERR_NOMEM, "out of device memory for the gradient shard (%zu floats)", n);
            z->own_g = 1;
            zero_mem(DT_MEM_GRADS, n, 1, 1);
            if ((rc = dt_dev()->memset_async(z->g_shard, 0, n * sizeof(float), z->co.stream))) return rc;
        } else {
            z->g_shard = grads + z->lo;
        }
        if ((rc = dt_optim_create_on(ocfg, n, DT_DEVICE_CUDA, z->co.stream, &z->opt))) return rc;
        zero_mem(DT_MEM_OPTIM, dt_optim_state_bytes(z->opt) / sizeof(float), 1, 1);
        return DT_OK;
    }
    /* host memory, or offload: the optimizer's slices on the host */
    if (stage == 3 || z->where == ZW_OFFLOAD || z->p16) {
        if (!(z->p_shard = malloc(sizeof(float) * (n ? n : 1))))
            return DT_ERR(DT_ERR_NOMEM, "out of memory for the parameter shard");
        z->own_p = 1;
        zero_mem(DT_MEM_PARAMS, n, 0, 1);
        if (z->dev) rc = zero_dcopy(z, z->p_shard, params + z->lo, n);
        else if (n) memcpy(z->p_shard, params + z->lo, n * sizeof(float));
        if (rc) return rc;
    } else {
        z->p_shard = params + z->lo;
    }
    if (stage == 3 && z->dev) { /* offload: the slice on the device too, the gathers' source */
        if (!(z->p_dev = dev_alloc(n))) return DT_ERR(DT_ERR_NOMEM, "out of device memory for the parameter shard");
        zero_mem(DT_MEM_PARAMS, n, 1, 1);
        if ((rc = zero_dcopy(z, z->p_dev, params + z->lo, n))) return rc;
    }
    if (z->dev && stage >= 2 && !(z->acc_host = malloc(sizeof(float) * (z->maxseg ? z->maxseg : 1))))
        return DT_ERR(DT_ERR_NOMEM, "out of memory");
    if (stage >= 2 || z->dev) {
        if (!(z->g_shard = calloc(n ? n : 1, sizeof(float))))
            return DT_ERR(DT_ERR_NOMEM, "out of memory for the gradient shard");
        z->own_g = 1;
        zero_mem(DT_MEM_GRADS, n, 0, 1);
    } else {
        z->g_shard = grads + z->lo;
    }
    if ((rc = dt_optim_create(ocfg, n, &z->opt))) return rc;
    zero_mem(DT_MEM_OPTIM, dt_optim_state_bytes(z->opt) / sizeof(float), 0, 1);
    return DT_OK;
}

void zero_shard_free(dt_zero *z) {
    const size_t n = z->hi - z->lo;
    const int d = z->where == ZW_DEVICE;
    if (z->opt) {
        zero_mem(DT_MEM_OPTIM, dt_optim_state_bytes(z->opt) / sizeof(float), d, -1);
        dt_optim_free(z->opt);
    }
    if (z->own_p) {
        zero_mem(DT_MEM_PARAMS, n, d, -1);
        if (d) dt_dev()->dev_free(z->p_shard);
        else free(z->p_shard);
    }
    if (z->own_g) {
        zero_mem(DT_MEM_GRADS, n, d, -1);
        if (d) dt_dev()->dev_free(z->g_shard);
        else free(z->g_shard);
    }
    if (z->p_dev) {
        zero_mem(DT_MEM_PARAMS, n, 1, -1);
        dt_dev()->dev_free(z->p_dev);
    }
    free(z->acc_host);
}

const float *zero_gather_src(const dt_zero *z) { return z->p_dev ? z->p_dev : z->p_shard; }

int zero_shard_reduce(dt_zero *z, layerbuf *g, size_t a, size_t pa, size_t pb, dt_work **w) {
    const int root = zero_owner_world(z, z->r);
    float *lp = g->buf + (pa - a);
    if (z->where == ZW_OFFLOAD) { /* reduced in place here, added into the host shard once done */
        g->acc_src = lp;
        g->acc_off = pa - z->lo;
        g->acc_n = pb - pa;
        return dt_reduce_ex(lp, lp, pb - pa, DT_F32, DT_SUM, root, z->comm, &z->gco, w);
    }
    /* the shard accumulates: this rank's contribution is shard + local
     * gradient (a kernel on the stream for a device shard), reduced in place */
    float *sp = z->g_shard + (pa - z->lo);
    int rc = dt_optim_grad_add(z->opt, sp, lp, pb - pa);
    return rc ? rc : dt_reduce_ex(sp, sp, pb - pa, DT_F32, DT_SUM, root, z->comm, &z->gco, w);
}

int zero_wait_grads(dt_zero *z, layerbuf *g) {
    int rc = zero_wait_list(&g->pending);
    if (g->acc_src) {
        if (!rc) rc = zero_dcopy(z, z->acc_host, g->acc_src, g->acc_n);
        float *sp = z->g_shard + g->acc_off;
        for (size_t i = 0; !rc && i < g->acc_n; i++) sp[i] += z->acc_host[i];
        g->acc_src = NULL;
    }
    return rc;
}

/* ---- accessors ---- */

int dt_zero_shard(const dt_zero *z, size_t *lo, size_t *hi) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (lo) *lo = z->lo;
    if (hi) *hi = z->hi;
    return DT_OK;
}
float *dt_zero_param_shard(dt_zero *z) { return z ? z->p_shard : NULL; }
float *dt_zero_grad_shard(dt_zero *z) { return z ? z->g_shard : NULL; }
dt_optim *dt_zero_optim(dt_zero *z) { return z ? z->opt : NULL; }
dt_mem_kind dt_zero_shard_mem(const dt_zero *z) { return z && z->where == ZW_DEVICE ? DT_MEM_DEVICE : DT_MEM_HOST; }

/* ---- re-sharing (stages 1/2) ---- */

int zero_wait_chunks(dt_zero *z, size_t a, size_t b) {
    int rc = DT_OK, k = 0;
    for (int i = 0; i < z->nchunks; i++) {
        chunk *c = &z->chunks[i];
        if (c->a < b && a < c->b) {
            int w = dt_work_wait(c->w);
            if (!rc) rc = w;
            dt_work_free(c->w);
        } else {
            z->chunks[k++] = *c;
        }
    }
    z->nchunks = k;
    return rc;
}

/* offload: the updated host slice back to the device (the working copy for
 * stages 1/2, the gathers' source for stage 3) */
static int push_slice(dt_zero *z) {
    if (z->where != ZW_OFFLOAD) return DT_OK;
    return zero_dcopy(z, z->cfg.stage == 3 ? z->p_dev : z->params + z->lo, z->p_shard, z->hi - z->lo);
}

static int reshare_params(dt_zero *z) {
    /* each owner broadcasts its updated slice, in chunks (params_bf16: its
     * bf16 rounding, written first, the chunks the same bytes) */
    const size_t es = z->p16 ? sizeof(uint16_t) : sizeof(float);
    if (z->p16 && (z->hi > z->lo)) {
        int rc = dt_optim_params_to_bf16(z->opt, z->p16 + z->lo, z->p_shard, z->hi - z->lo);
        if (rc) return rc;
    }
    size_t cap = z->cfg.bucket_cap_bytes / es;
    if (cap == 0) cap = z->maxseg ? z->maxseg : 1;
    for (int o = 0; o < z->N; o++) {
        size_t a = (size_t)o * z->S, b = a + z->S < z->P ? a + z->S : z->P;
        for (size_t c = a; c < b; c += cap) {
            size_t e = c + cap < b ? c + cap : b;
            if (z->nchunks == z->capchunks) {
                int nc = z->capchunks ? 2 * z->capchunks : 64;
                chunk *p = realloc(z->chunks, sizeof(chunk) * (size_t)nc);
                if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory");
                z->chunks = p;
                z->capchunks = nc;
            }
            chunk *ch = &z->chunks[z->nchunks];
            int rc = z->p16 ? dt_broadcast_ex(z->p16 + c, z->p16 + c, e - c, DT_BF16, zero_owner_world(z, o), z->comm,
                                              &z->co, &ch->w)
                            : dt_broadcast_ex(z->params + c, z->params + c, e - c, DT_F32, zero_owner_world(z, o),
                                              z->comm, &z->pco, &ch->w);
            if (rc) return rc;
            ch->a = c;
            ch->b = e;
            z->nchunks++;
        }
    }
    return DT_OK;
}

/* ---- the step ---- */

int dt_zero_step(dt_zero *z, float lr, double max_norm, double *norm_out) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (z->in_step) return DT_ERR(DT_ERR_STATE, "dt_zero_step inside a micro-step (call dt_zero_finish first)");
    const size_t n = z->hi - z->lo;
    float *g = z->g_shard;
    int rc;
    /* offload, stage 1: this rank's slice of the averaged gradients, after
     * the buckets (the stream waited for them at finish) */
    if (z->where == ZW_OFFLOAD && z->cfg.stage == 1 && (rc = zero_dcopy(z, g, z->grads + z->lo, n))) return rc;
    /* hybrid sharding: the shard summed over the replicas (the same n on
     * each): the leg between hosts (host memory: compressed with cfg.wire) */
    if (z->R > 1 && n && (rc = dt_allreduce_ex(g, g, n, DT_F32, DT_SUM, z->cfg.replicas, &z->rco, NULL))) return rc;
    /* the gradient helpers run where the optimizer's state is (the shard's memory) */
    if (z->cfg.average && (z->cfg.stage >= 2 || z->R > 1) && /* stage 1: DDP already divided by N */
        (rc = dt_optim_grad_scale(z->opt, g, n, 1.0f / (float)(z->cfg.stage >= 2 ? z->N * z->R : z->R))))
        return rc;
    if (norm_out || max_norm > 0) { /* a pass over the gradients and an allreduce: only when asked */
        double sq = 0.0;
        if ((rc = dt_optim_grad_sqnorm(z->opt, g, n, &sq))) return rc;
        if ((rc = dt_allreduce(&sq, &sq, 1, DT_F64, DT_SUM, z->comm))) return rc;
        double norm = sqrt(sq);
        if (norm_out) *norm_out = norm;
        if (max_norm > 0) {
            double coef = max_norm / (norm + 1e-6);
            if (coef < 1.0 && (rc = dt_optim_grad_scale(z->opt, g, n, (float)coef))) return rc;
        }
    }
    if ((rc = dt_optim_step(z->opt, z->p_shard, g, lr))) return rc;
    if (z->cfg.stage >= 2 && n) {
        if (z->where == ZW_DEVICE) rc = dt_dev()->memset_async(g, 0, n * sizeof(float), z->co.stream);
        else memset(g, 0, n * sizeof(float));
        if (rc) return rc;
    }
    if ((rc = push_slice(z))) return rc;
    return z->cfg.stage < 3 ? reshare_params(z) : DT_OK;
}

/* ---- gathering and loading ---- */

/* n floats of this rank's parameter slice from element k into host dst */
static int slice_to_host(const dt_zero *z, float *dst, size_t k, size_t n) {
    if (z->where == ZW_DEVICE) return zero_dcopy(z, dst, z->p_shard + k, n);
    memcpy(dst, z->p_shard + k, n * sizeof(float));
    return DT_OK;
}

int dt_zero_gather_range(dt_zero *z, size_t offset, size_t count, float *dst, int root) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (offset > z->P || count > z->P - offset) return DT_ERR(DT_ERR_INVALID, "range [%zu, +%zu) outside [0, %zu)", offset, count, z->P);
    int me = z->ci.world_rank == root, rc;
    if (me && !dst && count) return DT_ERR(DT_ERR_INVALID, "dst is NULL on the root");
    if (z->cfg.stage < 3) {
        if ((rc = zero_wait_chunks(z, offset, offset + count))) return rc;
        /* with a parameter wire the others' slices here are rounded, with
         * params_bf16 there are none: from their owners, as stage 3 */
        if (z->pco.wire == DT_WIRE_NATIVE && z->params) {
            if (me && count && z->dev) return zero_dcopy(z, dst, z->params + offset, count);
            if (me && count) memcpy(dst, z->params + offset, count * sizeof(float));
            return DT_OK;
        }
    }
    FOR_PIECES(z, offset, offset + count, o, pa, pb) {
        int ow = zero_owner_world(z, o);
        if (ow == root) {
            if (me && (rc = slice_to_host(z, dst + (pa - offset), pa - z->lo, pb - pa))) return rc;
        } else if (me) {
            if ((rc = dt_recv(dst + (pa - offset), pb - pa, DT_F32, ow, z->comm))) return rc;
        } else if (o == z->r) { /* host memory crosses (a device slice: through a host copy) */
            float *tmp = z->where == ZW_DEVICE ? malloc((pb - pa) * sizeof(float)) : NULL;
            if (z->where == ZW_DEVICE && !tmp)
                return DT_ERR(DT_ERR_NOMEM, "out of memory for a host copy of %zu parameters", pb - pa);
            rc = tmp ? slice_to_host(z, tmp, pa - z->lo, pb - pa) : DT_OK;
            if (!rc) rc = dt_send(tmp ? tmp : z->p_shard + (pa - z->lo), pb - pa, DT_F32, root, z->comm);
            free(tmp);
            if (rc) return rc;
        }
    }
    return DT_OK;
}

int dt_zero_load_param_shard(dt_zero *z, const float *slice) {
    if (!z || (!slice && z->hi > z->lo)) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    const size_t n = z->hi - z->lo;
    int rc;
    if (z->cfg.stage < 3 && (rc = zero_wait_chunks(z, 0, z->P))) return rc;
    if (z->where == ZW_DEVICE) {
        if ((rc = zero_dcopy(z, z->p_shard, slice, n))) return rc;
    } else if (n) {
        memmove(z->p_shard, slice, n * sizeof(float));
    }
    if ((rc = push_slice(z))) return rc;
    return z->cfg.stage < 3 ? reshare_params(z) : DT_OK;
}
