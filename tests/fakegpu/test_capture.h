/* tests/fakegpu/test_capture.h - the fakegpu tests' stderr capture: what the
 * fake said about a call (cap_begin(); call; msg = cap_end()). The text is
 * passed on to stderr too. */
#ifndef DT_TEST_CAPTURE_H
#define DT_TEST_CAPTURE_H

#include <stdio.h>
#include <unistd.h>

static FILE *cap_file;
static int cap_saved = -1;
static char cap_text[4096];

static inline void cap_begin(void) {
    fflush(stderr);
    cap_file = tmpfile();
    cap_saved = dup(2);
    if (cap_file) dup2(fileno(cap_file), 2);
}

/* what was written to stderr since cap_begin */
static inline const char *cap_end(void) {
    fflush(stderr);
    cap_text[0] = 0;
    if (cap_saved >= 0) {
        dup2(cap_saved, 2);
        close(cap_saved);
        cap_saved = -1;
    }
    if (cap_file) {
        rewind(cap_file);
        size_t n = fread(cap_text, 1, sizeof cap_text - 1, cap_file);
        cap_text[n] = 0;
        fclose(cap_file);
        cap_file = NULL;
    }
    fputs(cap_text, stderr);
    return cap_text;
}

#endif
