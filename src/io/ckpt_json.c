/* src/io/ckpt_json.c - strict JSON reader (DOM in an arena) and writer helpers. */
#include "io/ckpt_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---------------------------------------------------------------- */
typedef struct blk { struct blk *next; size_t used, cap; max_align_t data[]; } blk;

struct dtj_doc {
    blk *blocks;
    dtj_val *root;
};

static void *arena_alloc(dtj_doc *d, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    blk *b = d->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = d->blocks;
        b->used = 0;
        b->cap = cap;
        d->blocks = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void dtj_free(dtj_doc *d) {
    if (!d) return;
    blk *b = d->blocks;
    while (b) {
        blk *n = b->next;
        free(b);
        b = n;
    }
    free(d);
}

const dtj_val *dtj_root(const dtj_doc *d) { return d ? d->root : NULL; }

/* ---- UTF-8 ---------------------------------------------------------------- */
/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned cp, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

int dtj_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_seq(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* ---- parser --------------------------------------------------------------- */
typedef struct parser {
    const unsigned char *s;
    size_t n, i;
    int depth;
    dtj_doc *doc;
    char *err;
    size_t errcap;
    int failed;
} parser;

static void perr(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void perr(parser *p, size_t at, const char *fmt, ...) {
    if (p->failed) return;
    p->failed = 1;
    if (!p->err || !p->errcap) return;
    int k = snprintf(p->err, p->errcap, "at byte %zu: ", at);
    if (k < 0 || (size_t)k >= p->errcap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + k, p->errcap - (size_t)k, fmt, ap);
    va_end(ap);
}

static void skip_ws(parser *p) {
    while (p->i < p->n) {
        unsigned char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->i++;
        else break;
    }
}

static const char *describe(parser *p) {
    if (p->i >= p->n) return "end of input";
    unsigned char c = p->s[p->i];
    static _Thread_local char buf[32];
    if (c >= 0x20 && c < 0x7F) snprintf(buf, sizeof buf, "'%c'", c);
    else snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
}

static dtj_val *new_val(parser *p, dtj_type t, size_t at) {
    dtj_val *v = arena_alloc(p->doc, sizeof *v);
    if (!v) { perr(p, at, "out of memory"); return NULL; }
    memset(v, 0, sizeof *v);
    v->type = t;
    v->offset = at;
    return v;
}

static int hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = s[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* Parses a string starting at the opening quote; returns the decoded text in the
 * arena (NUL-terminated) and its length. */
static char *parse_string(parser *p, size_t *out_len) {
    size_t start = p->i;
    p->i++; /* opening quote */
    /* First pass: find the end and validate; decoded length <= raw length. */
    size_t j = p->i;
    while (1) {
        if (j >= p->n) { perr(p, start, "unterminated string"); return NULL; }
        unsigned char c = p->s[j];
        if (c == '"') break;
        if (c == '\\') { j += 2; continue; }
        j++;
    }
    size_t raw = j - p->i;
    char *out = arena_alloc(p->doc, raw + 1);
    if (!out) { perr(p, start, "out of memory"); return NULL; }
    size_t o = 0;
    while (p->i < p->n) {
        unsigned char c = p->s[p->i];
        if (c == '"') { p->i++; out[o] = '\0'; *out_len = o; return out; }
        if (c < 0x20) { perr(p, p->i, "control character 0x%02x in string", c); return NULL; }
        if (c == '\\') {
            if (p->i + 1 >= p->n) { perr(p, p->i, "unterminated string"); return NULL; }
            unsigned char e = p->s[p->i + 1];
            const char *map = "\"\"\\\\//b\bf\fn\nr\rt\t";
            const char *m = NULL;
            for (const char *q = map; *q; q += 2)
                if ((unsigned char)*q == e) { m = q; break; }
            if (m) { out[o++] = m[1]; p->i += 2; continue; }
            if (e != 'u') { perr(p, p->i, "invalid escape '\\%c'", e >= 0x20 && e < 0x7F ? e : '?'); return NULL; }
            unsigned cp;
            if (p->i + 6 > p->n || hex4(p->s + p->i + 2, &cp)) { perr(p, p->i, "invalid \\u escape"); return NULL; }
            size_t esc_at = p->i;
            p->i += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) { perr(p, esc_at, "lone low surrogate \\u%04x", cp); return NULL; }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                    hex4(p->s + p->i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    perr(p, esc_at, "high surrogate \\u%04x not followed by a low surrogate", cp);
                    return NULL;
                }
                p->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            /* Encoded length <= escape length (6 or 12 bytes), fits in raw. */
            if (cp < 0x80) out[o++] = (char)cp;
            else if (cp < 0x800) { out[o++] = (char)(0xC0 | (cp >> 6)); out[o++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                out[o++] = (char)(0xE0 | (cp >> 12));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[o++] = (char)(0xF0 | (cp >> 18));
                out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            }
            continue;
        }
        size_t k = utf8_seq(p->s + p->i, p->n - p->i);
        if (!k) { perr(p, p->i, "invalid UTF-8 in string"); return NULL; }
        memcpy(out + o, p->s + p->i, k);
        o += k;
        p->i += k;
    }
    perr(p, start, "unterminated string");
    return NULL;
}

static dtj_val *parse_value(parser *p);

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static dtj_val *parse_number(parser *p) {
    size_t start = p->i;
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i >= p->n || !is_digit(p->s[p->i])) { perr(p, start, "invalid number"); return NULL; }
    if (p->s[p->i] == '0') {
        p->i++;
        if (p->i < p->n && is_digit(p->s[p->i])) { perr(p, start, "invalid number (leading zero)"); return NULL; }
    } else {
        while (p->i < p->n && is_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || !is_digit(p->s[p->i])) { perr(p, start, "invalid number (no digit after '.')"); return NULL; }
        while (p->i < p->n && is_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || !is_digit(p->s[p->i])) { perr(p, start, "invalid number (bad exponent)"); return NULL; }
        while (p->i < p->n && is_digit(p->s[p->i])) p->i++;
    }
    dtj_val *v = new_val(p, DTJ_NUM, start);
    if (!v) return NULL;
    size_t len = p->i - start;
    char *t = arena_alloc(p->doc, len + 1);
    if (!t) { perr(p, start, "out of memory"); return NULL; }
    memcpy(t, p->s + start, len);
    t[len] = '\0';
    v->str = t;
    v->len = len;
    return v;
}

static int literal(parser *p, const char *word) {
    size_t k = strlen(word);
    if (p->n - p->i < k || memcmp(p->s + p->i, word, k) != 0) return 0;
    p->i += k;
    return 1;
}

/* Growable temporary array (heap) used while parsing one container. */
typedef struct tmpvec { void *p; size_t n, cap, elem; } tmpvec;
static int tv_push(tmpvec *t, const void *x) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 8;
        void *np = realloc(t->p, nc * t->elem);
        if (!np) return -1;
        t->p = np;
        t->cap = nc;
    }
    memcpy((char *)t->p + t->n * t->elem, x, t->elem);
    t->n++;
    return 0;
}

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen) {
    size_t m = alen < blen ? alen : blen;
    int c = memcmp(a, b, m);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

/* qsort has no context argument: sort an array of member pointers instead. */
static int member_ptr_cmp(const void *a, const void *b) {
    const dtj_member *x = *(const dtj_member *const *)a, *y = *(const dtj_member *const *)b;
    int c = key_cmp(x->key, x->key_len, y->key, y->key_len);
    if (c) return c;
    return x < y ? -1 : x > y;
}

static dtj_val *parse_object(parser *p) {
    size_t start = p->i;
    p->i++;
    dtj_val *v = new_val(p, DTJ_OBJ, start);
    if (!v) return NULL;
    tmpvec t = {NULL, 0, 0, sizeof(dtj_member)};
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') { p->i++; return v; }
    while (1) {
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != '"') { perr(p, p->i, "expected a string key, found %s", describe(p)); goto fail; }
        dtj_member m;
        m.key = parse_string(p, &m.key_len);
        if (!m.key) goto fail;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') { perr(p, p->i, "expected ':', found %s", describe(p)); goto fail; }
        p->i++;
        m.val = parse_value(p);
        if (!m.val) goto fail;
        if (tv_push(&t, &m)) { perr(p, p->i, "out of memory"); goto fail; }
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == '}') { p->i++; break; }
        perr(p, p->i, "expected ',' or '}', found %s", describe(p));
        goto fail;
    }
    v->len = t.n;
    v->members = arena_alloc(p->doc, t.n * sizeof(dtj_member));
    v->sorted = arena_alloc(p->doc, t.n * sizeof(size_t));
    dtj_member **ptrs = malloc(t.n * sizeof *ptrs);
    if (!v->members || !v->sorted || !ptrs) { free(ptrs); perr(p, start, "out of memory"); goto fail; }
    memcpy(v->members, t.p, t.n * sizeof(dtj_member));
    for (size_t k = 0; k < t.n; k++) ptrs[k] = &v->members[k];
    qsort(ptrs, t.n, sizeof *ptrs, member_ptr_cmp);
    for (size_t k = 0; k < t.n; k++) {
        v->sorted[k] = (size_t)(ptrs[k] - v->members);
        if (k && key_cmp(ptrs[k]->key, ptrs[k]->key_len, ptrs[k - 1]->key, ptrs[k - 1]->key_len) == 0) {
            const dtj_member *dup = ptrs[k] > ptrs[k - 1] ? ptrs[k] : ptrs[k - 1];
            perr(p, dup->val->offset, "duplicate key \"%.*s\"", (int)(dup->key_len > 200 ? 200 : dup->key_len),
                 dup->key);
            free(ptrs);
            goto fail;
        }
    }
    free(ptrs);
    free(t.p);
    return v;
fail:
    free(t.p);
    return NULL;
}

static dtj_val *parse_array(parser *p) {
    size_t start = p->i;
    p->i++;
    dtj_val *v = new_val(p, DTJ_ARR, start);
    if (!v) return NULL;
    tmpvec t = {NULL, 0, 0, sizeof(dtj_val *)};
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') { p->i++; return v; }
    while (1) {
        dtj_val *e = parse_value(p);
        if (!e) goto fail;
        if (tv_push(&t, &e)) { perr(p, p->i, "out of memory"); goto fail; }
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == ']') { p->i++; break; }
        perr(p, p->i, "expected ',' or ']', found %s", describe(p));
        goto fail;
    }
    v->len = t.n;
    v->items = arena_alloc(p->doc, t.n * sizeof(dtj_val *));
    if (!v->items) { perr(p, start, "out of memory"); goto fail; }
    memcpy(v->items, t.p, t.n * sizeof(dtj_val *));
    free(t.p);
    return v;
fail:
    free(t.p);
    return NULL;
}

static dtj_val *parse_value(parser *p) {
    skip_ws(p);
    if (p->i >= p->n) { perr(p, p->i, "unexpected end of input"); return NULL; }
    if (p->depth >= DTJ_MAX_DEPTH) { perr(p, p->i, "nesting deeper than %d", DTJ_MAX_DEPTH); return NULL; }
    unsigned char c = p->s[p->i];
    size_t at = p->i;
    dtj_val *v = NULL;
    switch (c) {
    case '{': p->depth++; v = parse_object(p); p->depth--; return v;
    case '[': p->depth++; v = parse_array(p); p->depth--; return v;
    case '"': {
        v = new_val(p, DTJ_STR, at);
        if (!v) return NULL;
        v->str = parse_string(p, &v->len);
        return v->str ? v : NULL;
    }
    case 't': case 'f': case 'n':
        if (literal(p, "true")) { v = new_val(p, DTJ_BOOL, at); if (v) v->boolean = 1; return v; }
        if (literal(p, "false")) { v = new_val(p, DTJ_BOOL, at); return v; }
        if (literal(p, "null")) return new_val(p, DTJ_NULL, at);
        perr(p, at, "invalid literal");
        return NULL;
    default:
        if (c == '-' || is_digit(c)) return parse_number(p);
        perr(p, at, "unexpected %s", describe(p));
        return NULL;
    }
}

dtj_doc *dtj_parse(const char *text, size_t len, char *err, size_t errcap) {
    if (err && errcap) err[0] = '\0';
    if (!text && len) {
        if (err && errcap) snprintf(err, errcap, "NULL text");
        return NULL;
    }
    dtj_doc *d = calloc(1, sizeof *d);
    if (!d) {
        if (err && errcap) snprintf(err, errcap, "out of memory");
        return NULL;
    }
    parser p = {(const unsigned char *)(text ? text : ""), len, 0, 0, d, err, errcap, 0};
    d->root = parse_value(&p);
    if (d->root) {
        skip_ws(&p);
        if (p.i != p.n) {
            perr(&p, p.i, "trailing data after the JSON value (%s)", describe(&p));
            d->root = NULL;
        }
    }
    if (!d->root) {
        if (!p.failed) perr(&p, p.i, "syntax error");
        dtj_free(d);
        return NULL;
    }
    return d;
}

const dtj_val *dtj_get(const dtj_val *o, const char *key) {
    if (!o || o->type != DTJ_OBJ || !key) return NULL;
    size_t kl = strlen(key), lo = 0, hi = o->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const dtj_member *m = &o->members[o->sorted[mid]];
        int c = key_cmp(m->key, m->key_len, key, kl);
        if (c == 0) return m->val;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int dtj_u64(const dtj_val *v, uint64_t *out) {
    if (!v || v->type != DTJ_NUM || v->len == 0) return -1;
    uint64_t x = 0;
    for (size_t k = 0; k < v->len; k++) {
        unsigned char c = (unsigned char)v->str[k];
        if (!is_digit(c)) return -1;
        unsigned d = c - '0';
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *out = x;
    return 0;
}

int dtj_is_cstr(const dtj_val *v) { return v && v->type == DTJ_STR && strlen(v->str) == v->len; }

/* ---- writer --------------------------------------------------------------- */
void dtj_buf_free(dtj_buf *b) {
    if (!b) return;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int reserve(dtj_buf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->len + extra + 1) {
        if (nc > SIZE_MAX / 2) { b->oom = 1; return -1; }
        nc *= 2;
    }
    char *np = realloc(b->p, nc);
    if (!np) { b->oom = 1; return -1; }
    b->p = np;
    b->cap = nc;
    return 0;
}

void dtj_put(dtj_buf *b, const char *s, size_t n) {
    if (reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void dtj_puts(dtj_buf *b, const char *s) { dtj_put(b, s, strlen(s)); }

void dtj_printf(dtj_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) { b->oom = 1; return; }
    if ((size_t)k < sizeof tmp) { dtj_put(b, tmp, (size_t)k); return; }
    if (reserve(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)k;
}

void dtj_put_str(dtj_buf *b, const char *s, size_t n) {
    dtj_put(b, "\"", 1);
    size_t run = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); esc = u; }
        if (esc) {
            dtj_put(b, s + k - run, run);
            run = 0;
            dtj_puts(b, esc);
        } else {
            run++;
        }
    }
    dtj_put(b, s + n - run, run);
    dtj_put(b, "\"", 1);
}
