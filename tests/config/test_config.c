/* dist config: defaults, setters, JSON round trip, environment, precedence,
 * and every bad-input path naming the key/value/file. */
#include <stdlib.h>
#include <unistd.h>
#include "dtrain/config.h"
#include "testutil.h"

int main(void) {
    dt_config c, d;
    dt_config_default(&c);
    CHECK(c.enable_data_parallel == 1 && c.zero_opt_level == 0 && c.bucket_size_mb == 25 &&
          c.first_bucket_mb == 1 && c.overlap == 1 && c.sync_bn == 0 && c.timeout_s == 300, "defaults");
    CHECK_OK(dt_config_set(&c, "zero_opt_level", "2"));
    CHECK_OK(dt_config_set(&c, "overlap", "off"));
    CHECK_OK(dt_config_set(&c, "bucket_size_mb", "0.5"));
    CHECK(c.zero_opt_level == 2 && c.overlap == 0 && c.bucket_size_mb == 0.5, "set");
    CHECK_ERR(dt_config_set(&c, "zero_opt_level", "4"), DT_ERR_INVALID, "out of range");
    CHECK_ERR(dt_config_set(&c, "zero_opt_level", "1.5"), DT_ERR_INVALID, "not an integer");
    CHECK_ERR(dt_config_set(&c, "bucket_size_mb", "lots"), DT_ERR_INVALID, "'lots' is not a number");
    CHECK_ERR(dt_config_set(&c, "overlap", "maybe"), DT_ERR_INVALID, "not a boolean");
    CHECK_ERR(dt_config_set(&c, "zero_level", "1"), DT_ERR_INVALID, "unknown config key 'zero_level'");
    CHECK_ERR(dt_config_set(&c, "timeout_s", "-1"), DT_ERR_INVALID, "timeout_s");
    CHECK(c.zero_opt_level == 2, "failed set leaves value unchanged");

    /* JSON round trip */
    char buf[1024];
    int n = dt_config_dumps(&c, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n < sizeof buf, "dumps length %d", n);
    dt_config_default(&d);
    CHECK_OK(dt_config_parse_json(&d, buf));
    CHECK(dt_config_hash(&c) == dt_config_hash(&d), "round trip hash");
    CHECK(d.zero_opt_level == 2 && d.overlap == 0 && d.bucket_size_mb == 0.5, "round trip values");
    dt_config_default(&d);
    CHECK(dt_config_hash(&c) != dt_config_hash(&d), "hash differs for different configs");
    CHECK_OK(dt_config_parse_json(&d, " { \"enable_data_parallel\" : true , \"zero_opt_level\": 1 } "));
    CHECK(d.zero_opt_level == 1, "seed dict");
    CHECK_OK(dt_config_parse_json(&d, "{}"));
    CHECK_ERR(dt_config_parse_json(&d, "{\"zero_opt_level\": 1, \"bogus\": 2}"), DT_ERR_INVALID, "unknown config key 'bogus'");
    CHECK(d.zero_opt_level == 1, "failed parse is all-or-nothing");
    CHECK_ERR(dt_config_parse_json(&d, "[1]"), DT_ERR_INVALID, "expected '{'");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\" true}"), DT_ERR_INVALID, "expected ':'");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\": true"), DT_ERR_INVALID, "expected ',' or '}'");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\": }"), DT_ERR_INVALID, "expected a value");
    CHECK_ERR(dt_config_parse_json(&d, "{} x"), DT_ERR_INVALID, "trailing");
    CHECK_ERR(dt_config_parse_json(&d, "{\"sync_bn\": \"yes\", \"zero_opt_level\": \"x\"}"), DT_ERR_INVALID, "not a number");

    /* files */
    char path[] = "/tmp/dtrain_cfg_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    CHECK_OK(dt_config_save(&c, path));
    dt_config_default(&d);
    CHECK_OK(dt_config_load(&d, path));
    CHECK(dt_config_hash(&c) == dt_config_hash(&d), "file round trip");
    FILE *f = fopen(path, "w");
    fputs("{\"zero_opt_level\": 9}", f);
    fclose(f);
    CHECK_ERR(dt_config_load(&d, path), DT_ERR_INVALID, path);
    unlink(path);
    CHECK_ERR(dt_config_load(&d, "/nonexistent/dtrain.json"), DT_ERR_IO, "/nonexistent/dtrain.json");

    /* environment overrides the file values */
    setenv("DTRAIN_ZERO_OPT_LEVEL", "3", 1);
    setenv("DTRAIN_SYNC_BN", "1", 1);
    CHECK_OK(dt_config_from_env(&d));
    CHECK(d.zero_opt_level == 3 && d.sync_bn == 1, "env");
    setenv("DTRAIN_OVERLAP", "sometimes", 1);
    CHECK_ERR(dt_config_from_env(&d), DT_ERR_INVALID, "DTRAIN_OVERLAP");
    unsetenv("DTRAIN_OVERLAP");
    CHECK(dt_config_has_key("sync_bn") && !dt_config_has_key("sync"), "has_key");
    return dt_test_finish("config_json");
}
