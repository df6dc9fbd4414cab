/*
 * test_format.c: the numbers util.c writes for people: sizes and durations.
 */
#include <criterion/criterion.h>

#include "util/util.h"

Test(format, size) {
    char out[32];
    sipp_format_size(999, out, sizeof out);
    cr_assert_str_eq(out, "999 B");
    sipp_format_size(807700000, out, sizeof out);
    cr_assert_str_eq(out, "807.7 MB");
}

Test(format, duration) {
    static const struct {
        double seconds;
        const char *text;
    } cases[] = {{0.4, "0:00"}, {75, "1:15"}, {3725, "1:02:05"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        sipp_format_duration(cases[i].seconds, out, sizeof out);
        cr_assert_str_eq(out, cases[i].text);
    }
}
