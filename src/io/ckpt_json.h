/* src/io/ckpt_json.h - internal: a strict JSON (RFC 8259) reader producing a
 * small DOM, and a growable text buffer with JSON string escaping. Used by the
 * safetensors header and the checkpoint manifest.
 *
 * Strictness: UTF-8 is validated (no overlongs, surrogates or code points above
 * U+10FFFF), control characters inside strings and lone surrogate escapes are
 * rejected, duplicate object keys are rejected, nesting is limited to
 * DTJ_MAX_DEPTH. Numbers keep their source text; dtj_u64 converts exact
 * non-negative integers. Never aborts: every failure is a NULL result with a
 * message in the caller's buffer. */
#ifndef DT_IO_CKPT_JSON_H
#define DT_IO_CKPT_JSON_H

#include <stddef.h>
#include <stdint.h>

#define DTJ_MAX_DEPTH 64

typedef enum dtj_type { DTJ_NULL, DTJ_BOOL, DTJ_NUM, DTJ_STR, DTJ_ARR, DTJ_OBJ } dtj_type;

typedef struct dtj_val dtj_val;
typedef struct dtj_member {
    const char *key; /* decoded, NUL-terminated (may contain an inner NUL: see key_len) */
    size_t key_len;
    dtj_val *val;
} dtj_member;

struct dtj_val {
    dtj_type type;
    int boolean;         /* DTJ_BOOL */
    size_t len;          /* STR: decoded byte length; NUM: text length; ARR/OBJ: count */
    const char *str;     /* STR: decoded text; NUM: source text (both NUL-terminated) */
    dtj_val **items;     /* ARR */
    dtj_member *members; /* OBJ, document order */
    size_t *sorted;      /* OBJ: member indexes sorted by key */
    size_t offset;       /* byte offset of the value in the input */
};

typedef struct dtj_doc dtj_doc;

/* Parses exactly one JSON value surrounded by optional whitespace. Returns NULL
 * on error with a message ("at byte N: ...") in err. */
dtj_doc *dtj_parse(const char *text, size_t len, char *err, size_t errcap);
void dtj_free(dtj_doc *doc);
const dtj_val *dtj_root(const dtj_doc *doc);
/* Member of an object by key, NULL if absent or v is not an object. */
const dtj_val *dtj_get(const dtj_val *obj, const char *key);
/* Exact non-negative integer (no fraction, no exponent, no minus) <= UINT64_MAX. */
int dtj_u64(const dtj_val *v, uint64_t *out);
/* 1 if v is a string without an inner NUL. */
int dtj_is_cstr(const dtj_val *v);
/* 1 if s[0..n) is valid UTF-8 (same rules as the parser). */
int dtj_utf8_valid(const char *s, size_t n);

/* Growable text buffer; on allocation failure it sets oom and stops growing. */
typedef struct dtj_buf { char *p; size_t len, cap; int oom; } dtj_buf;
void dtj_buf_free(dtj_buf *b);
void dtj_put(dtj_buf *b, const char *s, size_t n);
void dtj_puts(dtj_buf *b, const char *s);
void dtj_printf(dtj_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s[0..n) as a quoted, escaped JSON string. */
void dtj_put_str(dtj_buf *b, const char *s, size_t n);

#endif
