/* src/io/json.c - strict JSON over jansson (see json.h). */
#include "io/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 if no value in v lies deeper than DTJ_MAX_DEPTH containers. jansson's own
 * limit (2048) bounds this recursion. */
static int depth_ok(const json_t *v, int depth) {
    if (depth >= DTJ_MAX_DEPTH) return 0;
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_array(v)) {
        json_array_foreach(v, i, e) if (!depth_ok(e, depth + 1)) return 0;
    } else if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, e) if (!depth_ok(e, depth + 1)) return 0;
    }
    return 1;
}

json_t *dtj_parse(const char *text, size_t len, char *err, size_t errcap) {
    if (err && errcap) err[0] = '\0';
    if (!text && len) {
        if (err && errcap) snprintf(err, errcap, "NULL text");
        return NULL;
    }
    json_error_t e;
    json_t *v = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!v) {
        if (err && errcap)
            snprintf(err, errcap, "at line %d, column %d (byte %d): %s", e.line, e.column, e.position, e.text);
        return NULL;
    }
    if (!depth_ok(v, 0)) {
        json_decref(v);
        if (err && errcap) snprintf(err, errcap, "nesting deeper than %d levels", DTJ_MAX_DEPTH);
        return NULL;
    }
    return v;
}

int dtj_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

int dtj_utf8_valid(const char *s, size_t n) {
    json_t *j = json_stringn(s, n); /* validates; NULL if not UTF-8 */
    json_decref(j);
    return j != NULL;
}

json_t *dtj_real_as(double v, const char *fmt) {
    if (!isfinite(v)) return json_null();
    char buf[64];
    int k = snprintf(buf, sizeof buf, fmt, v);
    if (k > 0 && (size_t)k < sizeof buf) v = strtod(buf, NULL);
    return json_real(v);
}

/* ---- the manifest's layout ---------------------------------------------------- */
static int put_inline(FILE *f, const json_t *v) { return json_dumpf(v, f, JSON_ENCODE_ANY); }

static int put_key(FILE *f, const char *key) {
    json_t *k = json_string(key);
    int rc = k ? put_inline(f, k) : -1;
    json_decref(k);
    return rc || fputs(": ", f) < 0 ? -1 : 0;
}

/* An object, or an array holding a container, with at least one element. */
static int expands(const json_t *v) {
    if (json_is_object(v)) return json_object_size(v) > 0;
    size_t i;
    json_t *e;
    if (json_is_array(v))
        json_array_foreach(v, i, e) if (json_is_object(e) || json_is_array(e)) return 1;
    return 0;
}

static int put_expanded(FILE *f, const json_t *v) {
    int rc = fputs(json_is_object(v) ? "{" : "[", f) < 0;
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_object(v)) {
        int first = 1;
        json_object_foreach((json_t *)v, k, e) {
            rc |= fputs(first ? "\n    " : ",\n    ", f) < 0 || put_key(f, k) || put_inline(f, e);
            first = 0;
        }
    } else {
        json_array_foreach(v, i, e) rc |= fputs(i ? ",\n    " : "\n    ", f) < 0 || put_inline(f, e);
    }
    rc |= fputs(json_is_object(v) ? "\n  }" : "\n  ]", f) < 0;
    return rc ? -1 : 0;
}

char *dtj_dump_outline(const json_t *root, size_t *len) {
    if (!json_is_object(root)) return NULL;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return NULL;
    int rc = fputs("{", f) < 0, first = 1;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)root, k, v) {
        rc |= fputs(first ? "\n  " : ",\n  ", f) < 0 || put_key(f, k) ||
              (expands(v) ? put_expanded(f, v) : put_inline(f, v));
        first = 0;
    }
    rc |= fputs(first ? "}\n" : "\n}\n", f) < 0;
    if (fclose(f) != 0 || rc) {
        free(buf);
        return NULL;
    }
    if (len) *len = n;
    return buf;
}
