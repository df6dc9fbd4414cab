/*
 * sha256.h: SHA-256 of files and streams, through OpenSSL's EVP interface.
 */
#ifndef SIPP_UTIL_SHA256_H
#define SIPP_UTIL_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

typedef struct sipp_sha256 sipp_sha256;

/* A running hash; NULL when out of memory. */
sipp_sha256 *sipp_sha256_new(void);
void sipp_sha256_update(sipp_sha256 *h, const void *data, size_t len);
/* Starts over, as if new. */
void sipp_sha256_reset(sipp_sha256 *h);
/* Writes the lowercase hex digest; the hash must be reset before more updates. */
void sipp_sha256_final(sipp_sha256 *h, char hex[SIPP_SHA256_HEX]);
void sipp_sha256_free(sipp_sha256 *h);

/* Feeds the first `len` bytes of an open file (from offset 0) into h. */
sipp_status sipp_sha256_add_file(sipp_sha256 *h, int fd, uint64_t len, const char *path, char *errbuf);

/* The hash of a whole file. */
sipp_status sipp_sha256_file(const char *path, char hex[SIPP_SHA256_HEX], char *errbuf);

/* True when s is 64 hex digits (either case). */
bool sipp_sha256_valid(const char *s);

/* Lowercases a valid hex digest into out. */
void sipp_sha256_normalize(const char *s, char out[SIPP_SHA256_HEX]);

#endif
