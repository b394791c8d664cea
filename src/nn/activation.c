/* src/nn/activation.c - element-wise activations: relu, gelu, sigmoid, tanh. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "dtrain/nn.h"
#include "core/error.h"
#include "nn/nn_internal.h"

#define CHECK2(a, b)                                                                        \
    do {                                                                                    \
        if (!(a) || !(b)) return DT_ERR(DT_ERR_INVALID, "NULL " #a " or " #b);              \
    } while (0)
#define CHECK3(a, b, c)                                                                     \
    do {                                                                                    \
        if (!(a) || !(b) || !(c)) return DT_ERR(DT_ERR_INVALID, "NULL " #a ", " #b " or " #c); \
    } while (0)

int dt_relu_forward(float *out, const float *inp, size_t n) {
    CHECK2(out, inp);
    /* NaN propagates (NaN < 0 is false), as in torch.relu. */
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = x < 0.0f ? 0.0f : x;
    }
    return DT_OK;
}

int dt_nn_relu_backward_ex(float *dinp, const float *dout, const float *out, size_t n,
                           int acc) {
    CHECK3(dinp, dout, out);
    if (acc)
        for (size_t i = 0; i < n; i++) {
            float g = dout[i], y = out[i];
            dinp[i] += y > 0.0f ? g : 0.0f;
        }
    else
        for (size_t i = 0; i < n; i++) {
            float g = dout[i], y = out[i];
            dinp[i] = y > 0.0f ? g : 0.0f;
        }
    return DT_OK;
}

int dt_relu_backward(float *dinp, const float *dout, const float *out, size_t n) {
    return dt_nn_relu_backward_ex(dinp, dout, out, n, 1);
}

int dt_gelu_forward(float *out, const float *inp, size_t n) {
    CHECK2(out, inp);
    const float r2 = 0.70710678118654752f;
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + erff(x * r2));
    }
    return DT_OK;
}

int dt_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n) {
    return dt_nn_gelu_backward_ex(dinp, dout, inp, n, 1);
}

int dt_nn_gelu_backward_ex(float *dinp, const float *dout, const float *inp, size_t n,
                           int acc) {
    CHECK3(dinp, dout, inp);
    const float r2 = 0.70710678118654752f;
    const float inv_sqrt_2pi = 0.39894228040143268f;
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + erff(x * r2));
        float pdf = inv_sqrt_2pi * dt_nn_expf(-0.5f * x * x);
        float v = dout[i] * (cdf + x * pdf);
        dinp[i] = acc ? dinp[i] + v : v;
    }
    return DT_OK;
}

/* ---- vectorised sigmoid ---------------------------------------------------
 * The compiler does not vectorise dt_nn_expf in a loop on its own (its
 * clamps become branches under -ftrapping-math), so the same operation
 * sequence is written with GCC/Clang vector extensions, 8 lanes. Every lane
 * computes exactly what the scalar dt_nn_expf computes (same operations in
 * the same order, no FMA contraction in ISO C mode), so results do not
 * depend on the lane, the tail handling or the instruction set chosen. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

#define V8(c) ((v8f){c, c, c, c, c, c, c, c})
#define SEL(m, a, b) ((v8f)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m))))

#define DEFINE_SIGMOID8(NAME, ATTR)                                                         \
    ATTR static void NAME(float *out, const float *inp, size_t n) {                        \
        for (size_t i = 0; i < n; i += 8) {                                                 \
            v8f x;                                                                          \
            size_t m = n - i < 8 ? n - i : 8;                                               \
            if (m == 8) {                                                                   \
                memcpy(&x, inp + i, sizeof x);                                              \
            } else {                                                                        \
                x = V8(0.0f);                                                               \
                memcpy(&x, inp + i, m * sizeof(float));                                     \
            }                                                                               \
            x = -x;                                                                         \
            /* dt_nn_expf(x), lane-wise */                                                  \
            v8i lt = x < V8(88.72f);                                                        \
            v8f xc = SEL(lt, x, V8(88.72f));                                                \
            v8i gt = xc > V8(-87.33f);                                                      \
            xc = SEL(gt, xc, V8(-87.33f));                                                  \
            v8f kf = (xc * V8(1.44269504088896341f) + V8(12582912.0f)) - V8(12582912.0f);   \
            v8f r = xc - kf * V8(0.693145751953125f);                                       \
            r = r - kf * V8(1.428606765330187045e-06f);                                     \
            v8f p = V8(1.9875691500e-4f);                                                   \
            p = p * r + V8(1.3981999507e-3f);                                               \
            p = p * r + V8(8.3334519073e-3f);                                               \
            p = p * r + V8(4.1665795894e-2f);                                               \
            p = p * r + V8(1.6666665459e-1f);                                               \
            p = p * r + V8(5.0000001201e-1f);                                               \
            p = p * r * r + r + V8(1.0f);                                                   \
            v8i k = __builtin_convertvector(kf, v8i);                                       \
            v8i k1 = k >> 1, k2 = k - k1;                                                   \
            v8f s1 = (v8f)((k1 + 127) << 23), s2 = (v8f)((k2 + 127) << 23);                 \
            v8f y = p * s1 * s2;                                                            \
            y = SEL(x > V8(88.72f), V8(INFINITY), y);                                       \
            y = SEL(x < V8(-87.33f), V8(0.0f), y);                                          \
            y = SEL(x != x, x, y);                                                          \
            y = V8(1.0f) / (V8(1.0f) + y);                                                  \
            if (m == 8) memcpy(out + i, &y, sizeof y);                                      \
            else memcpy(out + i, &y, m * sizeof(float));                                    \
        }                                                                                   \
    }

DEFINE_SIGMOID8(sigmoid8_generic, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
DEFINE_SIGMOID8(sigmoid8_avx2, __attribute__((target("avx2"))))
#define HAVE_AVX2_CLONE 1
#endif

int dt_sigmoid_forward(float *out, const float *inp, size_t n) {
    CHECK2(out, inp);
#ifdef HAVE_AVX2_CLONE
    if (__builtin_cpu_supports("avx2")) {
        sigmoid8_avx2(out, inp, n);
        return DT_OK;
    }
#endif
    sigmoid8_generic(out, inp, n);
    return DT_OK;
}

int dt_nn_sigmoid_backward_ex(float *dinp, const float *dout, const float *out, size_t n,
                              int acc) {
    CHECK3(dinp, dout, out);
    if (acc)
        for (size_t i = 0; i < n; i++) {
            float y = out[i];
            dinp[i] += dout[i] * y * (1.0f - y);
        }
    else
        for (size_t i = 0; i < n; i++) {
            float y = out[i];
            dinp[i] = dout[i] * y * (1.0f - y);
        }
    return DT_OK;
}

int dt_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n) {
    return dt_nn_sigmoid_backward_ex(dinp, dout, out, n, 1);
}

int dt_tanh_forward(float *out, const float *inp, size_t n) {
    CHECK2(out, inp);
    for (size_t i = 0; i < n; i++) out[i] = tanhf(inp[i]);
    return DT_OK;
}

int dt_nn_tanh_backward_ex(float *dinp, const float *dout, const float *out, size_t n,
                           int acc) {
    CHECK3(dinp, dout, out);
    if (acc)
        for (size_t i = 0; i < n; i++) {
            float y = out[i];
            dinp[i] += dout[i] * (1.0f - y * y);
        }
    else
        for (size_t i = 0; i < n; i++) {
            float y = out[i];
            dinp[i] = dout[i] * (1.0f - y * y);
        }
    return DT_OK;
}

int dt_tanh_backward(float *dinp, const float *dout, const float *out, size_t n) {
    return dt_nn_tanh_backward_ex(dinp, dout, out, n, 1);
}
