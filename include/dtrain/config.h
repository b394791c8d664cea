/* dtrain/config.h - the distributed configuration (the seeds' dist config).
 *
 * Keys (JSON name = environment variable DTRAIN_<NAME upper-case> = trainer
 * flag --<name with '-' for '_'>):
 *   enable_data_parallel  bool    default true  gradients averaged across ranks
 *   zero_opt_level        int 0-3 default 0     ZeRO stage
 *   shard_group           world|host default world  the ranks ZeRO shards over: all of
 *                                               them, or those of each host (hybrid
 *                                               sharding: replicated across hosts, see
 *                                               dtrain/zero.h); every host must run the
 *                                               same number of ranks
 *   bucket_size_mb        number  default 25    bucket cap in MiB (0: one bucket per layer)
 *   first_bucket_mb       number  default 1     first bucket cap in MiB
 *   overlap               bool    default true  reduce buckets during backward (trainer:
 *                                               and step each bucket once reduced)
 *   broadcast_buffers     bool    default true  re-broadcast BN buffers every step
 *   sync_bn               bool    default false synchronised batch norm
 *   timeout_s             number  default 300   limit on any blocking call: a stall report,
 *                                               then the job ends (dtrain/reliability.h);
 *                                               DTRAIN_TIMEOUT is accepted too
 *   grad_comm_dtype       f32|bf16|f16 default f32 the type gradients travel in between
 *                                               processes (DDP buckets, ZeRO's gradient
 *                                               reductions: stage 1's buckets, stages 2-3's
 *                                               reduces to the owners, shard_group host's
 *                                               allreduce across hosts; host memory only);
 *                                               bf16/f16 halve the bytes, the
 *                                               sums stay f32 (coll.h, dt_coll_opts.wire:
 *                                               on the two-level path only the leg between
 *                                               hosts is compressed, within a host's
 *                                               shared-memory window nothing is)
 *   zero_offload          bool    default false ZeRO with the parameters on a GPU: false
 *                                               keeps each rank's shard and optimizer
 *                                               state on the device (stepped by the
 *                                               device optimizer), true on the host
 *                                               (ZeRO-Offload: less device memory, a
 *                                               copy each way per step); dtrain/zero.h
 *                                               "Device memory". Host models: no effect
 * Precedence, lowest first: defaults, JSON file, DTRAIN_* environment, flags.
 * Booleans accept true/false/1/0/yes/no/on/off, names (shard_group, grad_comm_dtype) any case. */
#ifndef DTRAIN_CONFIG_H
#define DTRAIN_CONFIG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DT_SHARD_WORLD = 0, DT_SHARD_HOST = 1 }; /* dt_config.shard_group */

typedef struct dt_config {
    int enable_data_parallel;
    int zero_opt_level;
    int shard_group;          /* DT_SHARD_WORLD or DT_SHARD_HOST; JSON "world" / "host" */
    double bucket_size_mb;
    double first_bucket_mb;
    int overlap;
    int broadcast_buffers;
    int sync_bn;
    double timeout_s;
    int grad_comm_dtype; /* 0 f32, 1 bf16, 2 f16: the dt_wire value (coll.h) */
    int zero_offload;    /* dt_zero_config.offload (dtrain/zero.h) */
} dt_config;

void dt_config_default(dt_config *cfg);
/* Set one key from text. DT_ERR_INVALID naming the key and value if the key
 * is unknown or the value malformed/out of range; cfg unchanged then. */
int dt_config_set(dt_config *cfg, const char *key, const char *value);
/* Apply every DTRAIN_<KEY> variable present in the environment. */
int dt_config_from_env(dt_config *cfg);
/* Apply a JSON object {"key": value, ...}: flat; each value a number, boolean
 * or string, taken as dt_config_set takes text ("zero_opt_level": "2" works).
 * Strict JSON (jansson): duplicate keys are refused, a syntax error names its
 * line and column; the first bad key or value (document order) is reported. */
int dt_config_parse_json(dt_config *cfg, const char *text);
/* Apply a JSON file; DT_ERR_IO naming the file if it cannot be read, is
 * larger than 8191 bytes, or is not a regular file (a directory, a FIFO or a
 * device is refused at once, never waited on). */
int dt_config_load(dt_config *cfg, const char *path);
/* Write cfg as one JSON object into buf (always NUL-terminated); returns the
 * length needed (excluding NUL), like snprintf, or a negative status. One
 * line, keys in the order above, ", " and ": " separators; integral numbers
 * without a fraction ("bucket_size_mb": 25), others with 17 digits. */
int dt_config_to_json(const dt_config *cfg, char *buf, size_t cap);
/* Write dt_config_to_json's line (and a newline) to path, created or
 * truncated. DT_ERR_IO naming the file and the reason (strerror: "No space
 * left on device", "Read-only file system", ...); a FIFO that no process
 * reads is refused at once, never waited on (one with a reader, or a
 * terminal, is written to). */
int dt_config_save(const dt_config *cfg, const char *path);
/* 1 if `key` is a config key. */
int dt_config_has_key(const char *key);
/* 64-bit hash of the effective values (compare across ranks at start). */
unsigned long long dt_config_hash(const dt_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
