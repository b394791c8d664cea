/* dist config: defaults, setters, JSON round trip, environment, precedence,
 * and every bad-input path naming the key/value/file. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "dtrain/config.h"
#include "testutil.h"

int main(void) {
    dt_config c, d;
    dt_config_default(&c);
    CHECK(c.enable_data_parallel == 1 && c.zero_opt_level == 0 && c.bucket_size_mb == 25 &&
          c.first_bucket_mb == 1 && c.overlap == 1 && c.sync_bn == 0 && c.timeout_s == 300 &&
          c.grad_comm_dtype == 0 && c.zero_offload == 0, "defaults");
    CHECK_OK(dt_config_set(&c, "zero_offload", "on"));
    CHECK(c.zero_offload == 1, "zero_offload on -> %d", c.zero_offload);
    CHECK_ERR(dt_config_set(&c, "zero_offload", "2"), DT_ERR_INVALID, "config key 'zero_offload': '2' is not a boolean");
    CHECK_OK(dt_config_set(&c, "zero_offload", "false"));
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
    /* grad_comm_dtype: a name, stored as its dt_wire value */
    CHECK_OK(dt_config_set(&c, "grad_comm_dtype", "f16"));
    CHECK(c.grad_comm_dtype == 2, "grad_comm_dtype f16 -> %d", c.grad_comm_dtype);
    CHECK_OK(dt_config_set(&c, "grad_comm_dtype", "BF16"));
    CHECK(c.grad_comm_dtype == 1, "grad_comm_dtype BF16 -> %d", c.grad_comm_dtype);
    CHECK_ERR(dt_config_set(&c, "grad_comm_dtype", "fp8"), DT_ERR_INVALID,
              "config key 'grad_comm_dtype': 'fp8' is not one of f32, bf16, f16");
    CHECK_ERR(dt_config_set(&c, "grad_comm_dtype", "1"), DT_ERR_INVALID, "'1' is not one of");
    CHECK_ERR(dt_config_set(&c, "grad_comm_dtype", ""), DT_ERR_INVALID, "'' is not one of");
    CHECK(c.grad_comm_dtype == 1, "failed set leaves grad_comm_dtype unchanged");
    /* shard_group: world (default) or host */
    CHECK(c.shard_group == DT_SHARD_WORLD, "shard_group default world");
    CHECK_OK(dt_config_set(&c, "shard_group", "host"));
    CHECK(c.shard_group == DT_SHARD_HOST, "shard_group host");
    CHECK_ERR(dt_config_set(&c, "shard_group", "node"), DT_ERR_INVALID,
              "config key 'shard_group': 'node' is not one of world, host");
    CHECK_ERR(dt_config_set(&c, "shard_group", "1"), DT_ERR_INVALID, "is not one of world, host");
    CHECK(c.shard_group == DT_SHARD_HOST, "failed shard_group set leaves value unchanged");
    CHECK_OK(dt_config_set(&c, "shard_group", "world"));
    CHECK_OK(dt_config_set(&c, "shard_group", "Host")); /* names in any case, as booleans */
    CHECK(c.shard_group == DT_SHARD_HOST, "shard_group Host");

    /* JSON round trip */
    char buf[1024];
    int n = dt_config_to_json(&c, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n < sizeof buf, "to_json length %d", n);
    dt_config_default(&d);
    CHECK_OK(dt_config_parse_json(&d, buf));
    CHECK(dt_config_hash(&c) == dt_config_hash(&d), "round trip hash");
    CHECK(d.zero_opt_level == 2 && d.overlap == 0 && d.bucket_size_mb == 0.5 && d.grad_comm_dtype == 1,
          "round trip values");
    CHECK(d.zero_opt_level == 2 && d.overlap == 0 && d.bucket_size_mb == 0.5 && d.shard_group == DT_SHARD_HOST,
          "round trip values");
    CHECK(strstr(buf, "\"shard_group\": \"host\"") != NULL, "shard_group dumped as a string: %s", buf);
    CHECK_ERR(dt_config_parse_json(&d, "{\"shard_group\": 1}"), DT_ERR_INVALID, "'1' is not one of world, host");
    dt_config_default(&d);
    CHECK(dt_config_hash(&c) != dt_config_hash(&d), "hash differs for different configs");
    CHECK_OK(dt_config_parse_json(&d, " { \"enable_data_parallel\" : true , \"zero_opt_level\": 1 } "));
    CHECK(d.zero_opt_level == 1, "seed dict");
    CHECK_OK(dt_config_parse_json(&d, "{}"));
    CHECK_ERR(dt_config_parse_json(&d, "{\"zero_opt_level\": 1, \"bogus\": 2}"), DT_ERR_INVALID, "unknown config key 'bogus'");
    CHECK(d.zero_opt_level == 1, "failed parse is all-or-nothing");
    CHECK_ERR(dt_config_parse_json(&d, "[1]"), DT_ERR_INVALID, "expected an object {\"key\": value, ...}, found an array");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\" true}"), DT_ERR_INVALID, "line 1, column 15: ':' expected near 'true'");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\": true"), DT_ERR_INVALID, "line 1, column 16: '}' expected near end of file");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\": }"), DT_ERR_INVALID, "line 1, column 13: unexpected token near '}'");
    CHECK_ERR(dt_config_parse_json(&d, "{} x"), DT_ERR_INVALID, "line 1, column 4: end of file expected near 'x'");
    CHECK_ERR(dt_config_parse_json(&d, "{\"sync_bn\": \"yes\", \"zero_opt_level\": \"x\"}"), DT_ERR_INVALID, "not a number");
    /* strict JSON: a key given twice, and what the hand-written reader took
     * though it is not JSON (bare words, hex, a leading '.'), are refused where
     * they stand */
    CHECK_ERR(dt_config_parse_json(&d, "{\"zero_opt_level\": 1,\n \"zero_opt_level\": 2}"), DT_ERR_INVALID,
              "line 2, column 17: duplicate object key near '\"zero_opt_level\"'");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\": yes}"), DT_ERR_INVALID, "line 1, column 15: invalid token near 'yes'");
    CHECK_ERR(dt_config_parse_json(&d, "{\"bucket_size_mb\": 0x10}"), DT_ERR_INVALID, "line 1, column 21");
    CHECK_ERR(dt_config_parse_json(&d, "{\"bucket_size_mb\": .5}"), DT_ERR_INVALID, "line 1, column 20");
    CHECK_ERR(dt_config_parse_json(&d, "{\"overlap\": [true]}"), DT_ERR_INVALID,
              "config key 'overlap': an array is not a boolean, number or string");
    CHECK_ERR(dt_config_parse_json(&d, "{\"sync_bn\": null}"), DT_ERR_INVALID, "config key 'sync_bn': null is not a boolean, number or string");
    CHECK(d.zero_opt_level == 1 && d.overlap == 1, "failed parses changed nothing");
    /* values as JSON gives them: numbers exactly, strings as text, escapes decoded */
    CHECK_OK(dt_config_parse_json(&d, "{\"bucket_size_mb\": 0.1, \"zero_opt_level\": 2e0, \"timeout_s\": \"1e3\", "
                                      "\"sync\\u005fbn\": 1, \"overlap\": false}"));
    CHECK(d.bucket_size_mb == 0.1 && d.zero_opt_level == 2 && d.timeout_s == 1000 && d.sync_bn == 1 && d.overlap == 0,
          "JSON values");
    /* the dump's bytes: what the manifests' dist_config and every rank's hash hold */
    dt_config_default(&d);
    d.first_bucket_mb = 0.1;
    d.timeout_s = 1e7;
    CHECK(dt_config_to_json(&d, buf, sizeof buf) > 0 &&
              strcmp(buf, "{\"enable_data_parallel\": true, \"zero_opt_level\": 0, \"shard_group\": \"world\", "
                          "\"bucket_size_mb\": 25, "
                          "\"first_bucket_mb\": 0.10000000000000001, \"overlap\": true, \"broadcast_buffers\": true, "
                          "\"sync_bn\": false, \"timeout_s\": 10000000, \"grad_comm_dtype\": \"f32\", "
                          "\"zero_offload\": false}") == 0,
          "to_json: %s", buf);
    CHECK(dt_config_to_json(&d, buf, 8) > 8 && strcmp(buf, "{\"enabl") == 0, "to_json truncates like snprintf: %s", buf);

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
    /* writes that fail say why; a FIFO nobody reads is refused at once */
    CHECK_ERR(dt_config_save(&c, "/dev/full"), DT_ERR_IO, "error writing config file '/dev/full': No space left");
    CHECK_ERR(dt_config_save(&c, "/nonexistent/dtrain.json"), DT_ERR_IO,
              "cannot write config file '/nonexistent/dtrain.json': No such file or directory");
    CHECK_ERR(dt_config_save(&c, NULL), DT_ERR_INVALID, "NULL");
    char fifo[] = "/tmp/dtrain_cfg_fifoXXXXXX";
    CHECK(mkdtemp(fifo) != NULL, "mkdtemp");
    char fpath[64];
    snprintf(fpath, sizeof fpath, "%s/f", fifo);
    CHECK(mkfifo(fpath, 0600) == 0, "mkfifo");
    CHECK_ERR(dt_config_save(&c, fpath), DT_ERR_IO, "it is a FIFO that no process reads");
    CHECK_ERR(dt_config_load(&d, fpath), DT_ERR_IO, "is a FIFO, not a regular file");
    unlink(fpath);
    rmdir(fifo);

    /* environment overrides the file values */
    setenv("DTRAIN_ZERO_OPT_LEVEL", "3", 1);
    setenv("DTRAIN_SYNC_BN", "1", 1);
    CHECK_OK(dt_config_from_env(&d));
    setenv("DTRAIN_GRAD_COMM_DTYPE", "f16", 1);
    CHECK_OK(dt_config_from_env(&d));
    CHECK(d.zero_opt_level == 3 && d.sync_bn == 1 && d.grad_comm_dtype == 2, "env");
    setenv("DTRAIN_GRAD_COMM_DTYPE", "half", 1);
    CHECK_ERR(dt_config_from_env(&d), DT_ERR_INVALID, "DTRAIN_GRAD_COMM_DTYPE: dt_config_set: config key 'grad_comm_dtype': 'half' is not one of");
    unsetenv("DTRAIN_GRAD_COMM_DTYPE");
    CHECK_OK(dt_config_parse_json(&d, "{\"grad_comm_dtype\": \"bf16\"}"));
    CHECK(d.grad_comm_dtype == 1, "grad_comm_dtype from JSON");
    CHECK_ERR(dt_config_parse_json(&d, "{\"grad_comm_dtype\": 16}"), DT_ERR_INVALID, "'16' is not one of");
    setenv("DTRAIN_OVERLAP", "sometimes", 1);
    CHECK_ERR(dt_config_from_env(&d), DT_ERR_INVALID, "DTRAIN_OVERLAP");
    unsetenv("DTRAIN_OVERLAP");
    setenv("DTRAIN_SHARD_GROUP", "host", 1);
    CHECK_OK(dt_config_from_env(&d));
    CHECK(d.shard_group == DT_SHARD_HOST, "DTRAIN_SHARD_GROUP");
    setenv("DTRAIN_SHARD_GROUP", "rack", 1);
    CHECK_ERR(dt_config_from_env(&d), DT_ERR_INVALID, "environment variable DTRAIN_SHARD_GROUP");
    CHECK(dt_test_msg_has("'rack' is not one of world, host"), "env message names the value: %s", dt_last_error());
    unsetenv("DTRAIN_SHARD_GROUP");
    CHECK(dt_config_has_key("sync_bn") && !dt_config_has_key("sync"), "has_key");
    return dt_test_finish("core_config");
}
