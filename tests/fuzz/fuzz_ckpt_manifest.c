/* tests/fuzz/fuzz_ckpt_manifest.c - the checkpoint manifest reader
 * (dtrain/ckpt.h: dt_ckpt_manifest_parse).
 *
 * Input: manifest.json bytes (passed with their length, not NUL-terminated).
 * Properties: a failure records a message naming "<memory>"; an accepted
 * manifest serializes (dt_ckpt_manifest_to_json), the text parses back, and
 * serializing that gives the same text (a fixed point); lookups of every vector
 * and metadata key find them. */
#include <string.h>
#include "dtrain/ckpt.h"
#include "dtrain/status.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dt_ckpt_manifest *m = NULL;
    dt_clear_error();
    int rc = dt_ckpt_manifest_parse((const char *)data, size, &m);
    if (rc != DT_OK) {
        FUZZ_CHECK(rc < 0 && dt_last_error()[0], "status %d without a message", rc);
        FUZZ_CHECK(strstr(dt_last_error(), "<memory>"), "message does not name <memory>: %s", dt_last_error());
        return 0;
    }
    FUZZ_CHECK(m && m->format_version >= DT_CKPT_FORMAT_VERSION_MIN && m->format_version <= DT_CKPT_FORMAT_VERSION &&
                   (m->generation == 0) == (m->format_version == 1),
               "format_version %d, generation %llu", m ? m->format_version : -1,
               m ? (unsigned long long)m->generation : 0ull);
    FUZZ_CHECK(m->world_size >= 1 && m->world_size <= DT_CKPT_MAX_WORLD, "world_size %d", m->world_size);
    for (int i = 0; i < m->nvectors; i++)
        FUZZ_CHECK(dt_ckpt_vector_index(m, m->vectors[i].name) == i, "vector '%s'", m->vectors[i].name);
    for (int i = 0; i < m->nmeta; i++)
        FUZZ_CHECK(dt_ckpt_meta_get(m, m->meta[i].key) && !strcmp(dt_ckpt_meta_get(m, m->meta[i].key), m->meta[i].value),
                   "meta '%s'", m->meta[i].key);
    for (int i = 0; i < m->nranks; i++)
        FUZZ_CHECK(m->ranks[i].rank >= 0 && m->ranks[i].rank < m->world_size, "rank %d", m->ranks[i].rank);
    char *j1 = NULL, *j2 = NULL;
    size_t l1 = 0, l2 = 0;
    FUZZ_CHECK(dt_ckpt_manifest_to_json(m, &j1, &l1) == DT_OK, "to_json: %s", dt_last_error());
    dt_ckpt_manifest *m2 = NULL;
    FUZZ_CHECK(dt_ckpt_manifest_parse(j1, l1, &m2) == DT_OK, "serialized manifest does not parse: %s", dt_last_error());
    FUZZ_CHECK(dt_ckpt_manifest_to_json(m2, &j2, &l2) == DT_OK, "to_json 2: %s", dt_last_error());
    FUZZ_CHECK(l1 == l2 && memcmp(j1, j2, l1) == 0, "serialization is not a fixed point:\n%s\n---\n%s", j1, j2);
    FUZZ_CHECK(m2->step == m->step && m2->nvectors == m->nvectors && m2->nranks == m->nranks, "round trip");
    free(j1);
    free(j2);
    dt_ckpt_manifest_free(m2);
    dt_ckpt_manifest_free(m);
    return 0;
}
