/* tests/fuzz/fuzz_safetensors.c - the .safetensors reader (dtrain/safetensors.h).
 *
 * Input: a whole file image. dt_st_open_memory validates it; on success every
 * tensor is described, looked up by name and read, and the metadata listed.
 * dt_st_parse_header is run on the same bytes (header only, file_size = size).
 * Properties: failures record a message naming "<memory>"; on success tensors
 * tile the data section (offsets ascending, in bounds), names are found at
 * their own index, dt_st_read copies exactly the bytes at the tensor's offset. */
#include <string.h>
#include "dtrain/safetensors.h"
#include "dtrain/status.h"
#include "fuzz_common.h"

static void walk(dt_st_file *f, const uint8_t *data, size_t size, int can_read) {
    int n = dt_st_num_tensors(f);
    FUZZ_CHECK(n >= 0, "num_tensors %d", n);
    uint64_t end_prev = 0;
    for (int i = 0; i < n; i++) {
        dt_st_info info;
        uint64_t nbytes = 0, off = 0;
        FUZZ_CHECK(dt_st_tensor_info(f, i, &info, &nbytes, &off) == DT_OK, "info %d: %s", i, dt_last_error());
        FUZZ_CHECK(info.name && info.ndim >= 0 && info.ndim <= DT_ST_MAX_DIMS, "info %d", i);
        FUZZ_CHECK(off <= size && nbytes <= size - off, "tensor %d [%llu, +%llu) outside the %zu-byte file", i,
                   (unsigned long long)off, (unsigned long long)nbytes, size);
        FUZZ_CHECK(i == 0 || off == end_prev, "tensor %d at %llu, previous ended at %llu", i,
                   (unsigned long long)off, (unsigned long long)end_prev);
        end_prev = off + nbytes;
        FUZZ_CHECK(dt_st_nbytes(&info) == nbytes, "nbytes %llu vs %llu", (unsigned long long)dt_st_nbytes(&info),
                   (unsigned long long)nbytes);
        FUZZ_CHECK(dt_st_find(f, info.name) == i, "find('%s') = %d, want %d", info.name, dt_st_find(f, info.name), i);
        if (can_read) {
            void *dst = malloc(nbytes ? (size_t)nbytes : 1);
            FUZZ_CHECK(dst, "malloc");
            FUZZ_CHECK(dt_st_read(f, i, dst, (size_t)nbytes) == DT_OK, "read %d: %s", i, dt_last_error());
            FUZZ_CHECK(nbytes == 0 || memcmp(dst, data + off, (size_t)nbytes) == 0, "read %d: wrong bytes", i);
            if (nbytes) FUZZ_CHECK(dt_st_read(f, i, dst, (size_t)nbytes - 1) != DT_OK, "short dst accepted");
            free(dst);
        } else {
            char b[8];
            FUZZ_CHECK(dt_st_read(f, i, b, sizeof b) == DT_ERR_STATE, "read on a header-only file");
        }
    }
    if (n > 0) FUZZ_CHECK(end_prev == size, "data section ends at %llu, file at %zu", (unsigned long long)end_prev, size);
    FUZZ_CHECK(dt_st_tensor_info(f, n, &(dt_st_info){0}, NULL, NULL) != DT_OK, "index n accepted");
    int nm = dt_st_num_metadata(f);
    FUZZ_CHECK(nm >= 0, "num_metadata %d", nm);
    for (int i = 0; i < nm; i++) {
        const char *k = NULL, *v = NULL;
        FUZZ_CHECK(dt_st_metadata_at(f, i, &k, &v) == DT_OK && k && v, "metadata %d", i);
        FUZZ_CHECK(dt_st_metadata_get(f, k) == v || strcmp(dt_st_metadata_get(f, k), v) == 0, "metadata_get '%s'", k);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dt_st_file *f = NULL;
    dt_clear_error();
    int rc = dt_st_open_memory(data, size, &f);
    if (rc == DT_OK) {
        FUZZ_CHECK(f != NULL, "DT_OK without a file");
        walk(f, data, size, 1);
        dt_st_close(f);
    } else {
        FUZZ_CHECK(rc < 0 && strstr(dt_last_error(), "<memory>"), "status %d, message '%s'", rc, dt_last_error());
    }
    f = NULL;
    int rc2 = dt_st_parse_header(data, size, size, &f);
    if (rc2 == DT_OK) {
        walk(f, data, size, 0);
        dt_st_close(f);
    }
    /* the same validation on the header and on the whole file */
    FUZZ_CHECK((rc == DT_OK) == (rc2 == DT_OK), "open_memory %d but parse_header %d (%s)", rc, rc2, dt_last_error());
    return 0;
}
