/* src/core/config.c - distributed config: defaults, text setters, environment,
 * JSON in and out. JSON is jansson's (the project's one JSON library): core
 * sits below src/io, so it calls jansson itself; a config is one flat object
 * of scalars and needs none of io's helpers. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "core/error.h"
#include "dtrain/config.h"

typedef enum { K_BOOL, K_INT, K_NUM, K_ENUM } kind;
typedef struct key { const char *name; kind k; size_t off; double lo, hi; const char *const *names; } key;

/* K_ENUM values: the int stored is the index of the name (grad_comm_dtype:
 * the dt_wire value, coll.h) */
static const char *const g_comm_dtypes[] = {"f32", "bf16", "f16", NULL};
/* K_ENUM values: the int is the index of the name (NULL-terminated list) */
static const char *const k_shard_groups[] = {"world", "host", NULL}; /* DT_SHARD_WORLD, DT_SHARD_HOST */

#define F(m) offsetof(dt_config, m)
static const key g_keys[] = {
    {"enable_data_parallel", K_BOOL, F(enable_data_parallel), 0, 1, NULL},
    {"zero_opt_level", K_INT, F(zero_opt_level), 0, 3, NULL},
    {"shard_group", K_ENUM, F(shard_group), 0, 1, k_shard_groups},
    {"bucket_size_mb", K_NUM, F(bucket_size_mb), 0, 1 << 20, NULL},
    {"first_bucket_mb", K_NUM, F(first_bucket_mb), 0, 1 << 20, NULL},
    {"overlap", K_BOOL, F(overlap), 0, 1, NULL},
    {"broadcast_buffers", K_BOOL, F(broadcast_buffers), 0, 1, NULL},
    {"sync_bn", K_BOOL, F(sync_bn), 0, 1, NULL},
    {"timeout_s", K_NUM, F(timeout_s), 0.001, 1e7, NULL},
    {"grad_comm_dtype", K_ENUM, F(grad_comm_dtype), 0, 2, g_comm_dtypes},
    {"zero_offload", K_BOOL, F(zero_offload), 0, 1, NULL},
};
#define NKEYS (sizeof g_keys / sizeof g_keys[0])

void dt_config_default(dt_config *c) {
    if (!c) return;
    *c = (dt_config){.enable_data_parallel = 1, .zero_opt_level = 0, .shard_group = DT_SHARD_WORLD, .bucket_size_mb = 25,
                     .first_bucket_mb = 1, .overlap = 1, .broadcast_buffers = 1, .sync_bn = 0,
                     .timeout_s = 300, .grad_comm_dtype = 0, .zero_offload = 0};
}

static const key *find(const char *name) {
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(g_keys[i].name, name) == 0) return &g_keys[i];
    return NULL;
}

int dt_config_has_key(const char *name) { return name && find(name) != NULL; }

int dt_config_set(dt_config *c, const char *name, const char *value) {
    if (!c || !name || !value) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    const key *k = find(name);
    if (!k) return DT_ERR(DT_ERR_INVALID, "unknown config key '%s'", name);
    char *p = (char *)c + k->off;
    if (k->k == K_BOOL) {
        static const char *const t[] = {"true", "1", "yes", "on"}, *const f[] = {"false", "0", "no", "off"};
        for (int i = 0; i < 4; i++) {
            if (strcasecmp(value, t[i]) == 0) { *(int *)p = 1; return DT_OK; }
            if (strcasecmp(value, f[i]) == 0) { *(int *)p = 0; return DT_OK; }
        }
        return DT_ERR(DT_ERR_INVALID, "config key '%s': '%s' is not a boolean (true/false)", name, value);
    }
    if (k->k == K_ENUM) {
        for (int i = 0; k->names[i]; i++)
            if (strcasecmp(value, k->names[i]) == 0) { *(int *)p = i; return DT_OK; }
        char list[64] = "";
        for (int i = 0; k->names[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", k->names[i]);
        return DT_ERR(DT_ERR_INVALID, "config key '%s': '%s' is not one of %s", name, value, list);
    }
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    while (end && isspace((unsigned char)*end)) end++;
    if (end == value || *end || errno || !isfinite(v))
        return DT_ERR(DT_ERR_INVALID, "config key '%s': '%s' is not a number", name, value);
    if (v < k->lo || v > k->hi)
        return DT_ERR(DT_ERR_INVALID, "config key '%s': %s is out of range [%g, %g]", name, value, k->lo, k->hi);
    if (k->k == K_INT) {
        if (v != floor(v)) return DT_ERR(DT_ERR_INVALID, "config key '%s': '%s' is not an integer", name, value);
        *(int *)p = (int)v;
    } else {
        *(double *)p = v;
    }
    return DT_OK;
}

int dt_config_from_env(dt_config *c) {
    if (!c) return DT_ERR(DT_ERR_INVALID, "NULL config");
    for (size_t i = 0; i < NKEYS; i++) {
        char var[64] = "DTRAIN_";
        size_t n = strlen(var);
        for (const char *s = g_keys[i].name; *s && n < sizeof var - 1; s++) var[n++] = (char)toupper((unsigned char)*s);
        var[n] = '\0';
        const char *v = getenv(var);
        if (!v && strcmp(g_keys[i].name, "timeout_s") == 0 && (v = getenv("DTRAIN_TIMEOUT")))
            snprintf(var, sizeof var, "DTRAIN_TIMEOUT"); /* the runtime's name for it */
        if (!v) continue;
        int rc = dt_config_set(c, g_keys[i].name, v);
        if (rc) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", dt_last_error());
            return DT_ERR(rc, "environment variable %s: %s", var, msg);
        }
    }
    return DT_OK;
}

/* A JSON value as the text dt_config_set takes (what the environment and the
 * flags give): strings as they are, true/false, numbers exactly (%.17g gives
 * a double back unchanged). NULL for null, arrays and objects. */
static const char *value_text(const json_t *v, char *buf, size_t cap) {
    switch (json_typeof(v)) {
    case JSON_STRING: return json_string_value(v);
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_INTEGER: snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); return buf;
    case JSON_REAL: snprintf(buf, cap, "%.17g", json_real_value(v)); return buf;
    default: return NULL;
    }
}

static const char *type_name(const json_t *v) {
    return json_is_object(v) ? "an object" : json_is_array(v) ? "an array" : json_is_null(v) ? "null" : "a scalar";
}

int dt_config_parse_json(dt_config *c, const char *text) {
    if (!c || !text) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    json_error_t e;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!root) return DT_ERR(DT_ERR_INVALID, "config JSON: line %d, column %d: %s", e.line, e.column, e.text);
    dt_config tmp = *c; /* all or nothing */
    int rc = DT_OK;
    if (!json_is_object(root))
        rc = DT_ERR(DT_ERR_INVALID, "config JSON: expected an object {\"key\": value, ...}, found %s", type_name(root));
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) { /* in document order: the first bad key is reported */
        char num[40];
        const char *t = value_text(v, num, sizeof num);
        rc = t ? dt_config_set(&tmp, k, t)
               : DT_ERR(DT_ERR_INVALID, "config key '%s': %s is not a boolean, number or string", k, type_name(v));
        if (rc) break;
    }
    json_decref(root);
    if (!rc) *c = tmp;
    return rc;
}

int dt_config_load(dt_config *c, const char *path) {
    if (!c || !path) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    /* non-blocking: opening a FIFO nobody writes to must not wait forever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return DT_ERR(DT_ERR_IO, "cannot open config file '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return DT_ERR(DT_ERR_IO, "config file '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        if (S_ISDIR(st.st_mode)) return DT_ERR(DT_ERR_IO, "'%s' is a directory, not a config file", path);
        return DT_ERR(DT_ERR_IO, "config file '%s' is %s, not a regular file: give a JSON file", path,
                      S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                      : S_ISSOCK(st.st_mode) ? "a socket" : "a special file");
    }
    char buf[8192];
    size_t n = 0;
    for (;;) { /* one byte more than fits tells "too large" */
        ssize_t k = read(fd, buf + n, sizeof buf - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            return DT_ERR(DT_ERR_IO, "cannot read config file '%s': %s", path, strerror(e));
        }
        if (k == 0) break;
        n += (size_t)k;
        if (n == sizeof buf) break;
    }
    close(fd);
    if (n > sizeof buf - 1) return DT_ERR(DT_ERR_IO, "config file '%s' is larger than %zu bytes", path, sizeof buf - 1);
    buf[n] = '\0';
    int rc = dt_config_parse_json(c, buf);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        return DT_ERR(rc, "config file '%s': %s", path, msg);
    }
    return DT_OK;
}

/* A number key's value: an integral one as a JSON integer ("25", as it was
 * always written), others as a real of 17 digits (exact). */
static json_t *number(double v) {
    return v == floor(v) && fabs(v) < 0x1p53 ? json_integer((json_int_t)v) : json_real(v);
}

int dt_config_to_json(const dt_config *c, char *buf, size_t cap) {
    if (!c || (!buf && cap)) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    json_t *o = json_object();
    int bad = !o;
    for (size_t i = 0; i < NKEYS; i++) {
        const char *p = (const char *)c + g_keys[i].off;
        json_t *v = g_keys[i].k == K_BOOL ? json_boolean(*(const int *)p)
                    : g_keys[i].k == K_ENUM ? json_string(g_keys[i].names[*(const int *)p])
                    : g_keys[i].k == K_INT ? json_integer(*(const int *)p) : number(*(const double *)p);
        bad |= json_object_set_new(o, g_keys[i].name, v) != 0;
    }
    /* jansson's default layout: one line, ", " and ": " */
    char *text = bad ? NULL : json_dumps(o, 0);
    json_decref(o);
    if (!text) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    size_t n = strlen(text);
    if (cap) snprintf(buf, cap, "%s", text);
    free(text);
    return (int)n;
}

int dt_config_save(const dt_config *c, const char *path) {
    if (!c || !path) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    char buf[1024];
    int n = dt_config_to_json(c, buf, sizeof buf - 1);
    if (n < 0) return n;
    if ((size_t)n >= sizeof buf - 1) return DT_ERR(DT_ERR_INTERNAL, "config JSON of %d bytes", n);
    buf[n++] = '\n';
    /* non-blocking: opening a FIFO nobody reads must not wait forever */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) {
        if (errno == ENXIO)
            return DT_ERR(DT_ERR_IO, "cannot write config file '%s': it is a FIFO that no process reads", path);
        return DT_ERR(DT_ERR_IO, "cannot write config file '%s': %s", path, strerror(errno));
    }
    int fl = fcntl(fd, F_GETFL); /* a reader is there (or a file): write as a plain write would */
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int e = 0;
    for (int done = 0; done < n && !e;) {
        ssize_t k = write(fd, buf + done, (size_t)(n - done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) e = k < 0 ? errno : EIO;
        else done += (int)k;
    }
    if (close(fd) != 0 && !e) e = errno;
    if (e) return DT_ERR(DT_ERR_IO, "error writing config file '%s': %s", path, strerror(e));
    return DT_OK;
}

unsigned long long dt_config_hash(const dt_config *c) {
    char buf[1024];
    dt_config_to_json(c, buf, sizeof buf);
    unsigned long long h = 1469598103934665603ull;
    for (const char *s = buf; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h;
}
