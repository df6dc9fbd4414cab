/*
 * leak.c: a deliberate leak, for tests/sanitizer/lsan_check.sh, which builds it with the flags of
 * the ASan unit-test build and checks that LeakSanitizer reports it. With an argument it frees what
 * it allocated, and LeakSanitizer must stay quiet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEAK_BYTES 4242

int main(int argc, char **argv) {
    char *p = malloc(LEAK_BYTES);
    if (!p) return 1;
    memset(p, 'x', LEAK_BYTES);
    printf("allocated %d bytes\n", LEAK_BYTES);
    if (argc > 1) free(p);
    p = NULL; /* the only pointer is gone: a definite leak unless freed above */
    return 0;
}
