/*
 * http_range.h: the Range request header of a single-file download (http_range.c), RFC 9110
 * section 14: "bytes=FIRST-LAST", "bytes=FIRST-" and "bytes=-SUFFIX", one range per request.
 * Pure (no I/O), so that it is unit-tested and fuzzed on its own.
 */
#ifndef SIPP_GATEWAY_HTTP_RANGE_H
#define SIPP_GATEWAY_HTTP_RANGE_H

#include <stdint.h>

typedef enum gw_range_result {
    GW_RANGE_OK,            /* *first and *len are set: answer 206 with that part */
    GW_RANGE_IGNORE,        /* a unit other than bytes, which RFC 9110 says to ignore: answer 200 */
    GW_RANGE_INVALID,       /* not a byte range: answer 416 */
    GW_RANGE_MULTIPLE,      /* more than one range (a multipart reply is not offered): answer 416 */
    GW_RANGE_UNSATISFIABLE, /* starts at or past the end, or a suffix of 0 bytes: answer 416 */
} gw_range_result;

/* Parses value (the header's value) for a file of size bytes. */
gw_range_result gw_range_parse(const char *value, uint64_t size, uint64_t *first, uint64_t *len);
/* Why a result other than GW_RANGE_OK is refused, for the 416's message. */
const char *gw_range_problem(gw_range_result r);

#endif
