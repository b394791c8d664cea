/* tests/fuzz/replay_main.c - runs a fuzz target once on each input file: the
 * regression / corpus replay used by ctest (no libFuzzer needed, any compiler).
 *
 *   fuzz_<target>_replay FILE_OR_DIR...
 *
 * Directories are read one level deep (files starting with '.' and README* are
 * skipped). Exit 0 if every input ran (a crash or a FUZZ_CHECK aborts the process,
 * naming the input on stderr first); 1 if an argument cannot be read. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz_common.h"

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 1; }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) { fclose(f); fprintf(stderr, "replay: out of memory\n"); return 1; }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    fclose(f);
    /* an exact-size copy, so that reading past the input is caught (ASan, valgrind) */
    uint8_t *in = malloc(n ? n : 1);
    if (!in) { free(buf); return 1; }
    memcpy(in, buf, n);
    free(buf);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int bad = 0, ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { fprintf(stderr, "replay: no such input %s\n", argv[i]); bad = 1; continue; }
        if (!S_ISDIR(st.st_mode)) { bad |= run_file(argv[i]); ran++; continue; }
        DIR *d = opendir(argv[i]);
        if (!d) { fprintf(stderr, "replay: cannot read %s\n", argv[i]); bad = 1; continue; }
        char **names = NULL;
        size_t nn = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || strncmp(e->d_name, "README", 6) == 0) continue;
            names = realloc(names, (nn + 1) * sizeof *names);
            size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[nn] = malloc(l);
            snprintf(names[nn], l, "%s/%s", argv[i], e->d_name);
            nn++;
        }
        closedir(d);
        if (nn) qsort(names, nn, sizeof *names, cmp);
        for (size_t k = 0; k < nn; k++) {
            struct stat fs;
            if (stat(names[k], &fs) == 0 && S_ISREG(fs.st_mode)) { bad |= run_file(names[k]); ran++; }
            free(names[k]);
        }
        free(names);
    }
    printf("replay: %d input(s) ran%s\n", ran, bad ? ", some could not be read" : "");
    return bad;
}
