/*
 * leak_test.c: a Criterion test that passes and leaks, for tests/sanitizer/lsan_check.sh. Criterion
 * reports it as passing; LeakSanitizer's report in its output is what must fail the suite, which is
 * why tests/run.sh looks for sanitizer reports in every test binary's output.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define LEAK_BYTES 4243

void *volatile leak_sink; /* volatile: the compiler may not drop the allocation */

Test(leak, passes_and_leaks) {
    leak_sink = malloc(LEAK_BYTES);
    cr_assert(leak_sink != NULL);
    memset(leak_sink, 'x', LEAK_BYTES);
    leak_sink = NULL;
}
