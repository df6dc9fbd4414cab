/*
 * multipart.h: multipart/form-data request bodies (RFC 7578 over RFC 2046), as OpenAI's audio
 * route takes them (multipart.c). Depends on nothing else in the gateway.
 */
#ifndef SIPP_GATEWAY_MULTIPART_H
#define SIPP_GATEWAY_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define GW_FORM_MAX_PARTS 32
#define GW_FORM_NAME_SIZE 128          /* a field name or a file name, decoded, with its NUL */
#define GW_FORM_TYPE_SIZE 128          /* a part's Content-Type, with its NUL */
#define GW_FORM_BOUNDARY_SIZE (70 + 1) /* RFC 2046: a boundary is 1 to 70 characters */

/* One part of a form: its field name, its file name when it is a file ("" otherwise: has_filename
 * says whether the part gave one), its Content-Type ("" when none) and its bytes, which point into
 * the body given to gw_multipart_parse. */
typedef struct gw_form_part {
    char name[GW_FORM_NAME_SIZE];
    char filename[GW_FORM_NAME_SIZE];
    bool has_filename;
    char content_type[GW_FORM_TYPE_SIZE];
    const char *data;
    size_t len;
} gw_form_part;

typedef struct gw_form {
    gw_form_part parts[GW_FORM_MAX_PARTS];
    size_t n;
} gw_form;

/* The boundary of a Content-Type header value "multipart/form-data; boundary=..." (the parameter
 * quoted or not) into out. False with a message for a 400 (or a 415: *not_form is then true, the
 * type is not multipart/form-data at all) in err. */
bool gw_multipart_boundary(const char *content_type, char out[GW_FORM_BOUNDARY_SIZE], bool *not_form,
                           char *err, size_t errlen);

/* Splits body[0..len) into its parts. The body is the request's, already bounded by
 * max_request_bytes; nothing is copied but the names. False with a message naming the problem
 * (no opening boundary, a part without Content-Disposition or name, no closing boundary, ...) in
 * err; *out is then partly filled and means nothing. */
bool gw_multipart_parse(const char *body, size_t len, const char *boundary, gw_form *out, char *err,
                        size_t errlen);

/* The first part named name, or NULL. */
const gw_form_part *gw_form_get(const gw_form *form, const char *name);

#endif
