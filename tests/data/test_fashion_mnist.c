/* tests/data/test_fashion_mnist.c - load the real Fashion-MNIST files of the
 * Debian package dataset-fashion-mnist (skipped, exit 77, when absent).
 *
 * Expected values were computed independently of dtrain with /usr/bin/python3,
 * numpy and gzip:
 *   d = '/usr/share/datasets/fashion-mnist/'
 *   im = gzip.open(d + s + '-images-idx3-ubyte.gz').read()      # s = train, t10k
 *   lb = gzip.open(d + s + '-labels-idx1-ubyte.gz').read()
 *   X = np.frombuffer(im, np.uint8, offset=16).reshape(-1, 28, 28)
 *   Y = np.frombuffer(lb, np.uint8, offset=8)
 *   X.shape, Y[:10], int(X.sum(dtype=np.uint64))                       # pixel sum
 *   w = np.arange(X.size, dtype=np.uint64) % 251 + 1
 *   int((X.reshape(-1).astype(np.uint64) * w).sum())                   # weighted sum
 *   np.bincount(Y), int(X[0].sum()), int(X[-1].sum()), int(X[0,14,14])
 *   # normalised batch of t10k samples [9999, 0, 5000, 1234], float32 math:
 *   x = ((X[idx].astype(np.float32) / np.float32(255)) - np.float32(0.2860)) / np.float32(0.3530)
 *   float(x.astype(np.float64).sum()), float(x[0,27,27]), float(x[2,10,10])
 *   # and the training-set statistics behind the default normalisation:
 *   (X / 255).mean() = 0.28604060, (X / 255).std() = 0.35302425
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "dtrain/data.h"
#include "testutil.h"

static const struct {
    int train;
    int64_t count;
    uint8_t first[10];
    uint64_t pixsum, wsum;
    uint64_t sum0, sumlast;
    int px0_14_14;
    int per_class;
} EXPECT[2] = {
    {1, 60000, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, 3431114169ull, 432275098992ull, 76247, 16684, 217, 6000},
    {0, 10000, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7}, 573469082ull, 72253401797ull, 33456, 24390, 110, 1000},
};

static uint64_t sample_sum(const dt_dataset *d, int64_t i) {
    uint64_t s = 0;
    for (int p = 0; p < 784; p++) s += d->images[i * 784 + p];
    return s;
}

int main(void) {
    if (access(DT_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("data_fashion_mnist: skipped (%s not installed: apt-get install "
               "dataset-fashion-mnist)\n", DT_FASHION_MNIST_DIR);
        return 77;
    }
    for (int k = 0; k < 2; k++) {
        dt_dataset d;
        CHECK_OK(dt_fashion_mnist_load(NULL, EXPECT[k].train, &d));
        if (!d.images) continue;
        const char *set = EXPECT[k].train ? "train" : "t10k";
        CHECK(d.count == EXPECT[k].count && d.rows == 28 && d.cols == 28 && d.num_classes == 10,
              "%s: %lld x %d x %d, %d classes", set, (long long)d.count, d.rows, d.cols,
              d.num_classes);
        int first_ok = 1;
        for (int i = 0; i < 10; i++) first_ok &= d.labels[i] == EXPECT[k].first[i];
        CHECK(first_ok, "%s: first 10 labels", set);
        uint64_t pixsum = 0, wsum = 0;
        const uint64_t npx = (uint64_t)d.count * 784;
        for (uint64_t i = 0; i < npx; i++) {
            pixsum += d.images[i];
            wsum += (uint64_t)d.images[i] * (i % 251 + 1);
        }
        CHECK(pixsum == EXPECT[k].pixsum, "%s: pixel sum %llu", set, (unsigned long long)pixsum);
        CHECK(wsum == EXPECT[k].wsum, "%s: weighted pixel sum %llu", set, (unsigned long long)wsum);
        int hist[10] = {0}, hist_ok = 1;
        for (int64_t i = 0; i < d.count; i++) hist[d.labels[i]]++;
        for (int c = 0; c < 10; c++) hist_ok &= hist[c] == EXPECT[k].per_class;
        CHECK(hist_ok, "%s: %d samples per class", set, EXPECT[k].per_class);
        CHECK(sample_sum(&d, 0) == EXPECT[k].sum0 && sample_sum(&d, d.count - 1) == EXPECT[k].sumlast,
              "%s: first/last sample sums", set);
        CHECK(d.images[14 * 28 + 14] == EXPECT[k].px0_14_14, "%s: pixel [0][14][14]", set);

        if (!EXPECT[k].train) {
            const int64_t idx[4] = {9999, 0, 5000, 1234};
            float *x = malloc(4 * 784 * sizeof *x);
            int32_t y[4];
            CHECK_OK(dt_dataset_batch(&d, idx, 4, x, y, NULL));
            double s = 0.0;
            for (int i = 0; i < 4 * 784; i++) s += x[i];
            CHECK(fabs(s - -237.03257217392093) < 1e-9, "normalised batch sum %.17g", s);
            CHECK(x[27 * 28 + 27] == -0.8101983666419983f && x[2 * 784 + 10 * 28 + 10] == 1.7227128744125366f,
                  "normalised values %.9g %.9g", (double)x[27 * 28 + 27],
                  (double)x[2 * 784 + 10 * 28 + 10]);
            CHECK(y[0] == d.labels[9999] && y[1] == 9 && y[3] == d.labels[1234], "batch labels");
            free(x);

            dt_dataset sub;
            CHECK_OK(dt_dataset_subset(&d, 100, &sub));
            CHECK(sub.count == 100 && sub.labels[1] == 2 && sample_sum(&sub, 0) == EXPECT[k].sum0,
                  "subset of the test set");
            dt_dataset_free(&sub);
        }
        dt_dataset_free(&d);
    }
    return dt_test_finish("data_fashion_mnist");
}
