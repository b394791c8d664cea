/* src/io/json.h - internal: dtrain's strict JSON, over jansson, for the files
 * the storage layer reads (checkpoint manifests, safetensors headers: untrusted
 * input) and writes (those two, and the layers above: the trainer's metrics).
 *
 * jansson (libjansson-dev) is the project's one JSON reader and writer. It
 * validates UTF-8 (no overlongs, surrogates or code points above U+10FFFF),
 * refuses control characters in strings, lone surrogate escapes, NUL in
 * strings and keys (JSON_ALLOW_NUL is never given), integers outside int64 and
 * reals that overflow a double. dtj_parse adds what the formats need on top:
 * duplicate keys refused, nesting bounded by DTJ_MAX_DEPTH, and messages that
 * say where (line, column, byte). Never aborts: every failure is a NULL
 * result with a message.
 *
 * Layering: jansson is a library below every layer, like zlib. src/core (the
 * dist config reader, the trace writer) calls it directly, since core cannot
 * import io; what only the storage formats need lives here. */
#ifndef DT_IO_JSON_H
#define DT_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#if JANSSON_VERSION_HEX < 0x020a00
#error "dtrain needs jansson 2.10 or later (libjansson-dev)"
#endif

#define DTJ_MAX_DEPTH 64

/* Parses exactly one JSON value (of any type) from text[0..len), surrounded
 * by optional whitespace; the text need not be NUL-terminated. Returns a new
 * reference (json_decref it), or NULL with "at line L, column C (byte B):
 * <what> near '<token>'" (or "nesting deeper than 64 levels") in err. */
json_t *dtj_parse(const char *text, size_t len, char *err, size_t errcap);

/* Exact non-negative integer (no fraction, no exponent): 0 and *out set, or
 * -1 (not an integer, negative). jansson reads integers up to INT64_MAX. */
int dtj_u64(const json_t *v, uint64_t *out);

/* 1 if s[0..n) is valid UTF-8 (the parser's rules). */
int dtj_utf8_valid(const char *s, size_t n);

/* A JSON number with the value printf's fmt (one double conversion, e.g.
 * "%.6f") shows for v: the same resolution as text written with fmt, with
 * trailing zeros dropped; JSON null for NaN and infinities, which JSON lacks.
 * Dump it with DTJ_REAL_DIGITS: 15 significant digits print every decimal of
 * up to 15 digits exactly. NULL only when out of memory. */
json_t *dtj_real_as(double v, const char *fmt);
#define DTJ_REAL_DIGITS JSON_REAL_PRECISION(15)

/* An object as text in the checkpoint manifest's layout: one member per line
 * (indent 2); an object, or an array holding an object or an array, one
 * element per line (indent 4); everything else on its member's line, every
 * value encoded by jansson (", " and ": " separators). Ends with a newline.
 * malloc'd (free()); *len set if len. NULL if root is not an object or out of
 * memory. */
char *dtj_dump_outline(const json_t *root, size_t *len);

#endif
