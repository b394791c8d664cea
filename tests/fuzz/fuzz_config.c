/* tests/fuzz/fuzz_config.c - the dist config parser (dtrain/config.h).
 *
 * Input: the text of a JSON config (given to dt_config_parse_json as a
 * NUL-terminated copy; an input containing a NUL byte is cut there). If the
 * first byte is '=', the rest is "key=value" for dt_config_set instead.
 * Properties: a failure records a message and leaves the config unchanged
 * (all or nothing); an accepted config has every value in its documented range;
 * dt_config_to_json output parses back to the same config (same hash). */
#include <math.h>
#include <string.h>
#include "dtrain/config.h"
#include "dtrain/status.h"
#include "fuzz_common.h"

static void check_ranges(const dt_config *c) {
    FUZZ_CHECK(c->enable_data_parallel == 0 || c->enable_data_parallel == 1, "edp %d", c->enable_data_parallel);
    FUZZ_CHECK(c->zero_opt_level >= 0 && c->zero_opt_level <= 3, "zero %d", c->zero_opt_level);
    FUZZ_CHECK(isfinite(c->bucket_size_mb) && c->bucket_size_mb >= 0, "bucket %g", c->bucket_size_mb);
    FUZZ_CHECK(isfinite(c->first_bucket_mb) && c->first_bucket_mb >= 0, "first %g", c->first_bucket_mb);
    FUZZ_CHECK(c->overlap == 0 || c->overlap == 1, "overlap");
    FUZZ_CHECK(c->broadcast_buffers == 0 || c->broadcast_buffers == 1, "bb");
    FUZZ_CHECK(c->sync_bn == 0 || c->sync_bn == 1, "sync_bn");
    FUZZ_CHECK(isfinite(c->timeout_s) && c->timeout_s > 0, "timeout %g", c->timeout_s);
}

/* field by field: the struct has padding */
static int same(const dt_config *a, const dt_config *b) {
    return a->enable_data_parallel == b->enable_data_parallel && a->zero_opt_level == b->zero_opt_level &&
           a->bucket_size_mb == b->bucket_size_mb && a->first_bucket_mb == b->first_bucket_mb &&
           a->overlap == b->overlap && a->broadcast_buffers == b->broadcast_buffers && a->sync_bn == b->sync_bn &&
           a->timeout_s == b->timeout_s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    dt_config c, before;
    dt_config_default(&c);
    before = c;
    int rc;
    if (size && text[0] == '=') {
        char *eq = strchr(text + 1, '=');
        if (!eq) { free(text); return 0; }
        *eq = '\0';
        rc = dt_config_set(&c, text + 1, eq + 1);
    } else {
        rc = dt_config_parse_json(&c, text);
    }
    if (rc != DT_OK) {
        FUZZ_CHECK(rc < 0 && dt_last_error()[0], "failure %d without a message", rc);
        FUZZ_CHECK(same(&c, &before), "config changed by a failed parse");
        free(text);
        return 0;
    }
    check_ranges(&c);
    char buf[1024];
    int n = dt_config_to_json(&c, buf, sizeof buf);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof buf, "dumps returned %d", n);
    dt_config back;
    dt_config_default(&back);
    back.sync_bn = !back.sync_bn; /* every key is dumped: the parse must overwrite this */
    FUZZ_CHECK(dt_config_parse_json(&back, buf) == DT_OK, "dumped config does not parse: %s (%s)", dt_last_error(), buf);
    FUZZ_CHECK(same(&back, &c) && dt_config_hash(&back) == dt_config_hash(&c), "round trip changed the config: %s", buf);
    free(text);
    return 0;
}
