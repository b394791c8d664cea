/* dtrain/data.h - image-classification datasets (IDX / Fashion-MNIST),
 * normalisation and batching, and the distributed sampler.
 *
 * Datasets are held in memory as the raw unsigned bytes of the files; batches
 * are converted to normalised float32 on demand by dt_dataset_batch.
 *
 * The sampler gives each data-parallel rank its share of a per-epoch
 * permutation, with PyTorch's DistributedSampler partition logic (see
 * dt_sampler_init). The batch iterator cuts a rank's share into batches.
 *
 * All functions returning int return DT_OK or a negative dt_status with a
 * message for dt_last_error(); file errors are DT_ERR_IO and name the file. */
#ifndef DTRAIN_DATA_H
#define DTRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- datasets -------------------------------------------------------------- */

/* Default location of the Debian package dataset-fashion-mnist. */
#define DT_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define DT_FASHION_MNIST_CLASSES 10
/* Mean and standard deviation of the Fashion-MNIST training pixels scaled to
 * [0, 1]: the default normalisation. */
#define DT_FASHION_MNIST_MEAN 0.2860f
#define DT_FASHION_MNIST_STD 0.3530f

typedef struct dt_dataset {
    int64_t count;    /* number of samples */
    int rows, cols;   /* image size; one sample is rows * cols bytes */
    int num_classes;  /* labels are in [0, num_classes) */
    uint8_t *images;  /* [count][rows][cols], row-major; owned (dt_dataset_free) */
    uint8_t *labels;  /* [count]; owned */
} dt_dataset;

/* Load an IDX image file (magic 0x00000803: unsigned bytes, 3 dimensions
 * count x rows x cols, big-endian header) and an IDX label file (magic
 * 0x00000801: unsigned bytes, 1 dimension count). Each file may be gzip
 * compressed or not (zlib detects it). num_classes is computed as
 * 1 + the largest label. On success *out owns the data (free it with
 * dt_dataset_free); on failure *out is zeroed and nothing is leaked.
 * Errors, each naming the file:
 *   DT_ERR_IO       file missing or unreadable; bad magic (expected and got
 *                   printed in hex); truncated header or data ("expected N
 *                   bytes of ... data, got M"); trailing bytes after the data;
 *                   corrupt gzip stream; absurd dimensions (count, rows or
 *                   cols 0, rows or cols > 16384, count > 2^31 - 1); image and
 *                   label counts differ; a label out of range (see _ex)
 *   DT_ERR_INVALID  NULL arguments
 *   DT_ERR_NOMEM    allocation failed */
int dt_idx_load(const char *images_path, const char *labels_path, dt_dataset *out);
/* The same with a declared number of classes: num_classes in [1, 256] makes
 * a label >= num_classes an error (DT_ERR_IO naming the file, the sample and
 * the label); num_classes == 0 computes it as dt_idx_load does. */
int dt_idx_load_ex(const char *images_path, const char *labels_path, int num_classes,
                   dt_dataset *out);

/* Load Fashion-MNIST from `dir` (NULL: DT_FASHION_MNIST_DIR): the training set
 * (train != 0: train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
 * 60000 samples) or the test set (t10k-*, 10000 samples). For each file the
 * .gz name is used if it exists, else the uncompressed name. Declares 10
 * classes and requires 28 x 28 images (DT_ERR_IO otherwise). Errors as
 * dt_idx_load_ex. */
int dt_fashion_mnist_load(const char *dir, int train, dt_dataset *out);

/* Free the buffers and zero *ds. Safe on a zeroed dataset and on NULL. */
void dt_dataset_free(dt_dataset *ds);

/* Deep copy of the first n samples of src (0 < n <= src->count) into *out
 * (same rows, cols and num_classes), e.g. for quick tests. DT_ERR_INVALID for
 * NULL arguments or n out of range, DT_ERR_NOMEM; *out is zeroed on failure.
 * out must not be src. */
int dt_dataset_subset(const dt_dataset *src, int64_t n, dt_dataset *out);

/* ---- normalisation and batching -------------------------------------------- */

/* x = (pixel / 255 - mean) / std, computed in float (as torchvision's ToTensor
 * followed by Normalize). */
typedef struct dt_normalize {
    float mean;
    float std; /* > 0 */
} dt_normalize;

/* {DT_FASHION_MNIST_MEAN, DT_FASHION_MNIST_STD}. */
dt_normalize dt_normalize_fashion_mnist(void);

/* Gather samples indices[0..B) of ds into x, laid out [B][1][rows][cols]
 * (B * rows * cols floats, normalised with *norm, or with the Fashion-MNIST
 * defaults if norm is NULL), and their labels into y[0..B) (y may be NULL to
 * skip labels). B == 0 is a no-op. Errors (DT_ERR_INVALID, nothing written):
 * NULL ds/indices/x, B < 0, an index outside [0, count) (message names its
 * position and value), std <= 0 or mean/std not finite. */
int dt_dataset_batch(const dt_dataset *ds, const int64_t *indices, int B, float *x, int32_t *y,
                     const dt_normalize *norm);

/* ---- distributed sampler --------------------------------------------------- */

/* PyTorch DistributedSampler semantics over a dataset of n samples split among
 * num_replicas ranks. Every epoch (that starts at position `start` of its global
 * order: 0, or where a checkpoint was taken, see dt_sampler_set_start):
 *   1. order = a permutation of [0, n) drawn with dt_rng_seed2(seed, epoch) and
 *      dt_rng_shuffle_i64 (identical on all ranks), or [0, 1, ..., n-1] when
 *      shuffle == 0;
 *   2. drop_last == 0: num_samples = ceil((n - start) / R); the order is
 *      padded to total_size = start + num_samples * R by wrapping around
 *      (order[p] = order[p mod n] for p >= n; repeated if n < R);
 *      drop_last == 1: num_samples = floor((n - start) / R); the order is cut
 *      to total_size = start + num_samples * R (the tail is dropped);
 *      (0 when start >= n: the epoch is over)
 *   3. rank r takes order[start + r], order[start + r + R], ...: num_samples
 *      indices. With drop_last == 1 the ranks' parts are disjoint; with 0 they
 *      are disjoint except for the (total_size - n) padded repeats, and
 *      together they cover [start, n) of the order.
 * After every rank has taken `taken` indices, the epoch's global order has been
 * consumed up to position start + taken * R (dt_sampler_position), whatever R:
 * an epoch interrupted there continues at that position with any number of
 * ranks (and any batch size) with no sample lost and none repeated beyond the
 * padding; with the same R it continues with exactly the indices an
 * uninterrupted epoch would have given.
 * The fields are read-only for users (set them through the functions). */
typedef struct dt_sampler {
    int64_t n;
    int num_replicas, rank;
    int shuffle, drop_last;
    uint64_t seed, epoch;
    int64_t start;       /* position of the global order the current epoch starts at */
    int64_t num_samples; /* indices per rank in the current epoch */
    int64_t total_size;  /* start + num_samples * num_replicas */
} dt_sampler;

/* Initialise for epoch 0. Errors (DT_ERR_INVALID): NULL s, n < 1,
 * num_replicas < 1, rank outside [0, num_replicas), shuffle or drop_last not
 * 0/1, drop_last with n < num_replicas (every rank would get 0 samples). */
int dt_sampler_init(dt_sampler *s, int64_t n, int num_replicas, int rank, int shuffle,
                    int drop_last, uint64_t seed);
/* Select the epoch (the permutation); call it at the start of every epoch, with
 * the same value on all ranks. The epoch starts at position 0. No-op for NULL s. */
void dt_sampler_set_epoch(dt_sampler *s, uint64_t epoch);
/* Start the current epoch at position `start` of its global order (resuming an
 * epoch interrupted there, in any layout): num_samples and total_size follow
 * (rule above; start >= n leaves nothing). Same value on all ranks.
 * DT_ERR_INVALID for NULL s, an uninitialised sampler, start < 0 or > 2^62. */
int dt_sampler_set_start(dt_sampler *s, int64_t start);
/* The position in the current epoch's global order once every rank has taken
 * `taken` of its indices: start + taken * num_replicas (negative dt_status for
 * NULL s or taken outside [0, num_samples]). */
int64_t dt_sampler_position(const dt_sampler *s, int64_t taken);
/* Indices this rank gets per epoch (negative dt_status for NULL s). */
int64_t dt_sampler_num_samples(const dt_sampler *s);
/* Write this rank's num_samples indices for the current epoch into out. O(n)
 * time; with shuffle it allocates a temporary of n int64 (DT_ERR_NOMEM).
 * DT_ERR_INVALID for NULL arguments. */
int dt_sampler_indices(const dt_sampler *s, int64_t *out);

/* ---- batch iterator -------------------------------------------------------- */

/* Cuts one rank's indices of one epoch into consecutive batches of batch_size;
 * the last batch is smaller (drop_last == 0) or skipped (drop_last == 1).
 * Fields are read-only for users. */
typedef struct dt_batch_iter {
    int64_t *indices; /* this rank's indices for the epoch (owned) */
    int64_t count;    /* number of indices (the sampler's num_samples) */
    int64_t cap;      /* allocated indices */
    int64_t pos;      /* next index to hand out */
    int batch_size, drop_last;
} dt_batch_iter;

/* Take the sampler's indices for its current epoch (may be none). batch_size
 * >= 1, drop_last 0/1, else DT_ERR_INVALID; DT_ERR_NOMEM. *it is zeroed on
 * failure. Free with dt_batch_iter_free. */
int dt_batch_iter_init(dt_batch_iter *it, const dt_sampler *s, int batch_size, int drop_last);
/* Re-take the sampler's indices (after dt_sampler_set_epoch / _set_start) and
 * rewind; the epoch may be longer or shorter than before (DT_ERR_NOMEM). */
int dt_batch_iter_reset(dt_batch_iter *it, const dt_sampler *s);
/* Batches per epoch: count / B with drop_last, ceil(count / B) without
 * (negative dt_status for NULL it). Equal on all ranks of one sampler setup. */
int64_t dt_batch_iter_num_batches(const dt_batch_iter *it);
/* Next batch: *indices points into the iterator (valid until reset/free), *B
 * is its size. Returns 1 for a batch, 0 at the end of the epoch (then *B = 0),
 * DT_ERR_INVALID for NULL arguments. */
int dt_batch_iter_next(dt_batch_iter *it, const int64_t **indices, int *B);
/* Free the indices and zero *it; safe on a zeroed iterator and on NULL. */
void dt_batch_iter_free(dt_batch_iter *it);

#ifdef __cplusplus
}
#endif
#endif
