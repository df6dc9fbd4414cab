/*
 * sha256.c: SHA-256 with OpenSSL's EVP digest interface (the low-level SHA256_* calls are
 * deprecated in OpenSSL 3). Files are read in large chunks with pread, so hashing a model runs at
 * the speed of the disk and never changes the file offset of a descriptor shared with a writer.
 */
#include "util/sha256.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define HASH_CHUNK (4u << 20) /* bytes read per pread */
#define SHA256_BYTES 32

struct sipp_sha256 {
    EVP_MD_CTX *ctx;
};

sipp_sha256 *sipp_sha256_new(void) {
    sipp_sha256 *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        sipp_sha256_free(h);
        return NULL;
    }
    return h;
}

void sipp_sha256_update(sipp_sha256 *h, const void *data, size_t len) { EVP_DigestUpdate(h->ctx, data, len); }

void sipp_sha256_reset(sipp_sha256 *h) { EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL); }

void sipp_sha256_final(sipp_sha256 *h, char hex[SIPP_SHA256_HEX]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(h->ctx, md, &n);
    static const char digits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < SHA256_BYTES; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * SHA256_BYTES] = '\0';
}

bool sipp_sha256_hex(const void *data, size_t len, char hex[SIPP_SHA256_HEX]) {
    sipp_sha256 *h = sipp_sha256_new();
    if (!h) {
        hex[0] = '\0';
        return false;
    }
    sipp_sha256_update(h, data, len);
    sipp_sha256_final(h, hex);
    sipp_sha256_free(h);
    return true;
}

void sipp_sha256_free(sipp_sha256 *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

sipp_status sipp_sha256_add_file(sipp_sha256 *h, int fd, uint64_t len, const char *path, char *errbuf) {
    unsigned char *buf = malloc(HASH_CHUNK);
    if (!buf) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory hashing '%s'", path);
    uint64_t off = 0;
    while (off < len) {
        size_t want = len - off < HASH_CHUNK ? (size_t)(len - off) : HASH_CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            free(buf);
            return sipp_fail(errbuf, SIPP_ERR_IO, "cannot read '%s': %s", path,
                             got < 0 ? strerror(errno) : "the file is shorter than expected");
        }
        sipp_sha256_update(h, buf, (size_t)got);
        off += (uint64_t)got;
    }
    free(buf);
    return SIPP_OK;
}

sipp_status sipp_sha256_file(const char *path, char hex[SIPP_SHA256_HEX], char *errbuf) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sipp_fail(errbuf, errno == ENOENT ? SIPP_ERR_NOT_FOUND : SIPP_ERR_IO, "cannot open '%s': %s",
                         path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    }
    sipp_sha256 *h = sipp_sha256_new();
    if (!h) {
        close(fd);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory hashing '%s'", path);
    }
    sipp_status s = sipp_sha256_add_file(h, fd, (uint64_t)st.st_size, path, errbuf);
    close(fd);
    if (s == SIPP_OK) sipp_sha256_final(h, hex);
    sipp_sha256_free(h);
    return s;
}

bool sipp_sha256_valid(const char *s) {
    if (!s) return false;
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n])) return false;
    return n == 2 * SHA256_BYTES;
}

void sipp_sha256_normalize(const char *s, char out[SIPP_SHA256_HEX]) {
    size_t i = 0;
    for (; i < 2 * SHA256_BYTES && s[i]; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[i] = '\0';
}
