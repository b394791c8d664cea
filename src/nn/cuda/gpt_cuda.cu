/* src/nn/cuda/gpt_cuda.cu - the CUDA gpt backend's table (gpt_backend_cuda),
 * its instances (a non-blocking stream, a cuBLASLt handle with its
 * workspace and plans, the reductions' scratch) and its memory functions.
 * The kernels and their launchers are in the other files of this folder,
 * one role each (cuda_common.cuh lists them). */
#include <stdlib.h>
#include <string.h>
#include "nn/cuda/cuda_common.cuh"

/* cuBLASLt's workspace (32 MiB: what it asks for on Hopper) */
#define LT_WS_BYTES ((size_t)32 << 20)
/* the column reductions' partial sums (8 MiB) and arrival counters */
#define RED_FLOATS ((size_t)2 << 20)
#define RED_COUNTERS 4096

/* ---- life ------------------------------------------------------------------------------ */

static void cu_close(gpt_be *be) {
    if (!be) return;
    int cur = -1;
    int switched = cudaGetDevice(&cur) == cudaSuccess && cur != be->device &&
                   cudaSetDevice(be->device) == cudaSuccess;
    if (be->stream) cudaStreamSynchronize(be->stream);
    gpt_cuda_lt_release(be);
    if (be->lt) cublasLtDestroy(be->lt);
    cudaFree(be->lt_ws);
    cudaFree(be->red);
    cudaFree(be->red_count);
    cudaFree(be->enc_dev);
    if (be->stream) cudaStreamDestroy(be->stream);
    cudaGetLastError(); /* nothing of a closing instance is reported */
    if (switched) cudaSetDevice(cur);
    free(be->enc_host);
    free(be->enc_count);
    free(be);
}

static int open_parts(gpt_be *be) {
    GPT_CU(cudaGetDevice(&be->device), "cudaGetDevice");
    struct cudaDeviceProp prop;
    GPT_CU(cudaGetDeviceProperties(&prop, be->device), "cudaGetDeviceProperties");
    be->sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    GPT_CU(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cublasStatus_t st = cublasLtCreate(&be->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        be->lt = NULL;
        return dt_error(DT_ERR_BACKEND, "cublasLtCreate", "cuBLASLt status %d", (int)st);
    }
    be->lt_ws_bytes = LT_WS_BYTES;
    GPT_CU(cudaMalloc(&be->lt_ws, be->lt_ws_bytes), "cudaMalloc (cuBLASLt workspace)");
    be->red_floats = RED_FLOATS;
    GPT_CU(cudaMalloc((void **)&be->red, be->red_floats * sizeof(float)), "cudaMalloc (reduction scratch)");
    be->red_count_n = RED_COUNTERS;
    GPT_CU(cudaMalloc((void **)&be->red_count, RED_COUNTERS * sizeof(unsigned)), "cudaMalloc (reduction counters)");
    GPT_CU(cudaMemsetAsync(be->red_count, 0, RED_COUNTERS * sizeof(unsigned), be->stream), "cudaMemsetAsync");
    GPT_CU(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize");
    return DT_OK;
}

static int cu_open(gpt_be **out, gpt_prec prec) {
    *out = NULL;
    if (prec != GPT_F32 && prec != GPT_BF16)
        return dt_error(DT_ERR_INVALID, "gpt_backend_cuda.open", "unknown precision %d", (int)prec);
    gpt_be *be = (gpt_be *)calloc(1, sizeof *be);
    if (!be) return dt_error(DT_ERR_NOMEM, "gpt_backend_cuda.open", "%zu bytes", sizeof *be);
    be->prec = prec;
    int rc = open_parts(be);
    if (rc) {
        cu_close(be);
        return rc;
    }
    *out = be;
    return DT_OK;
}

static void *cu_stream(gpt_be *be) { return be ? (void *)be->stream : NULL; }

/* ---- sizes ------------------------------------------------------------------------------- */

static int cu_vocab_pad(int V) { return (V + 127) / 128 * 128; }

/* ---- memory ------------------------------------------------------------------------------- */

static int cu_alloc(gpt_be *be, size_t bytes, const char *what, void **p) {
    *p = NULL;
    void *q = NULL;
    const size_t want = bytes ? bytes : 1;
    cudaError_t e = cudaMalloc(&q, want);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        int known = cudaMemGetInfo(&fr, &tot) == cudaSuccess;
        cudaGetLastError();
        const double mib = 1.0 / (1 << 20);
        if (e == cudaErrorMemoryAllocation) {
            if (known)
                return dt_error(DT_ERR_NOMEM, "cudaMalloc",
                                "%s: %zu bytes (%.1f MiB) of device memory do not fit on device %d: "
                                "%zu bytes (%.1f MiB) free of %zu (%.1f MiB)",
                                what, want, want * mib, be->device, fr, fr * mib, tot, tot * mib);
            return dt_error(DT_ERR_NOMEM, "cudaMalloc", "%s: %zu bytes (%.1f MiB) of device memory do not fit on "
                            "device %d (free memory unknown)", what, want, want * mib, be->device);
        }
        return dt_error(DT_ERR_BACKEND, "cudaMalloc", "%s: %zu bytes: %s (%s)", what, want, cudaGetErrorString(e),
                        cudaGetErrorName(e));
    }
    e = cudaMemsetAsync(q, 0, want, be->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess) {
        cudaFree(q);
        return gpt_cuda_fail(e, "cudaMemsetAsync (zeroing a new allocation)");
    }
    *p = q;
    return DT_OK;
}

static void cu_free(gpt_be *be, void *p) {
    if (p && cudaFree(p) != cudaSuccess) cudaGetLastError();
}

static int cu_upload(gpt_be *be, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return DT_OK;
    GPT_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->stream), "cudaMemcpyAsync (upload)");
    /* pageable memory is staged before the call returns; pinned memory is
     * read by the copy engine later: wait, so that src may be reused */
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, src) != cudaSuccess) {
        cudaGetLastError();
        return DT_OK;
    }
    if (a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged)
        GPT_CU(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (upload)");
    return DT_OK;
}

static int cu_download(gpt_be *be, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return DT_OK;
    GPT_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, be->stream), "cudaMemcpyAsync (download)");
    GPT_CU(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (download)");
    return DT_OK;
}

static int cu_copy(gpt_be *be, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return DT_OK;
    GPT_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, be->stream), "cudaMemcpyAsync (copy)");
    return DT_OK;
}

static int cu_zero(gpt_be *be, void *p, size_t bytes) {
    if (bytes == 0) return DT_OK;
    GPT_CU(cudaMemsetAsync(p, 0, bytes, be->stream), "cudaMemsetAsync");
    return DT_OK;
}

static int cu_sync(gpt_be *be) {
    GPT_CU(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize");
    GPT_CU(cudaGetLastError(), "a kernel of the stream");
    return DT_OK;
}

/* ---- the table ------------------------------------------------------------------------------ */

extern "C" const gpt_backend gpt_backend_cuda = {
    "cuda",
    1,
    (1u << GPT_F32) | (1u << GPT_BF16),
    /* life */
    cu_open,
    cu_close,
    cu_stream,
    /* sizes */
    cu_vocab_pad,
    gpt_cuda_attention_sizes,
    /* memory */
    cu_alloc,
    cu_free,
    cu_upload,
    cu_download,
    cu_copy,
    cu_zero,
    cu_sync,
    gpt_cuda_cast,
    /* embeddings */
    gpt_cuda_encoder_forward,
    gpt_cuda_encoder_backward,
    /* LayerNorm */
    gpt_cuda_layernorm_forward,
    gpt_cuda_layernorm_backward,
    /* linear layers */
    gpt_cuda_matmul_forward,
    gpt_cuda_matmul_gelu_forward,
    gpt_cuda_matmul_backward,
    /* GELU */
    gpt_cuda_gelu_forward,
    gpt_cuda_gelu_backward,
    /* attention */
    gpt_cuda_attention_forward,
    gpt_cuda_attention_backward,
    gpt_cuda_attention_step,
    /* cross-entropy */
    gpt_cuda_crossentropy_forward,
    gpt_cuda_crossentropy_backward,
};
