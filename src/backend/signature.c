/*
 * signature.c: Ed25519 signatures of artifacts (sipp_artifact_sign, sipp_artifact_verify).
 *
 * What is signed. An artifact's manifest.json says what it is and its sbom.spdx.json names every
 * file with its SHA-256, so a signature over those two documents covers every byte of the
 * artifact. signature.json holds the signature:
 *
 *   {"format": 1, "algorithm": "ed25519", "public_key": BASE64 (the raw 32-byte key),
 *    "signed": [{"file": "manifest.json", "sha256": HEX}, {"file": "sbom.spdx.json", "sha256": HEX}],
 *    "signature": BASE64}
 *
 * and the signed message is the text "sipp-artifact-signature 1\n" followed by one line
 * "FILE SHA256\n" per signed document, in that order, so that what was signed can be read back.
 *
 * Verifying checks, in this order, and stops at the first problem, naming the file: the signature
 * file itself; the two documents' hashes; the signature, with the caller's public key when given
 * (else the key the signature names, which proves integrity but not whose artifact it is); then
 * every file the SBOM lists, in its order, against its SHA-256; then that the directory holds
 * nothing the SBOM does not list (a library added beside the others would be loaded too). Links
 * must resolve to a listed file of the same directory.
 *
 * The keys are the user's, in PEM (openssl genpkey -algorithm ed25519). OpenSSL does the
 * cryptography; sipp only decides what is signed.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/sha256.h"
#include "util/util.h"

#define SIGNATURE_FILE "signature.json"
#define SIGNATURE_FORMAT 1
#define SIGNATURE_HEADER "sipp-artifact-signature 1\n"
#define ED25519_KEY_BYTES 32
#define ED25519_SIG_BYTES 64
#define B64_ROOM(n) (4 * (((n) + 2) / 3) + 1)

static const char *const signed_files[] = {"manifest.json", "sbom.spdx.json"};
#define N_SIGNED (sizeof signed_files / sizeof signed_files[0])

static bool join(char *out, size_t n, const char *dir, const char *name) {
    return (size_t)snprintf(out, n, "%s/%s", dir, name) < n;
}

/* The signed message for the documents' hashes. */
static void message(char hashes[N_SIGNED][SIPP_SHA256_HEX], sipp_buf *m) {
    sipp_buf_append(m, SIGNATURE_HEADER, strlen(SIGNATURE_HEADER));
    for (size_t i = 0; i < N_SIGNED; i++)
        sipp_buf_appendf(m, "%s %s\n", signed_files[i], hashes[i]);
}

static sipp_status hash_signed(const char *dir, char hashes[N_SIGNED][SIPP_SHA256_HEX], char *err) {
    for (size_t i = 0; i < N_SIGNED; i++) {
        char p[PATH_MAX];
        if (!join(p, sizeof p, dir, signed_files[i]))
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "artifact path '%s' is too long", dir);
        struct stat st;
        if (stat(p, &st) != 0)
            return sipp_fail(err, SIPP_ERR_NOT_FOUND,
                             "artifact '%s' has no %s; rebuild it with make or sipp build (which write it)",
                             dir, signed_files[i]);
        sipp_status s = sipp_sha256_file(p, hashes[i], err);
        if (s != SIPP_OK) return s;
    }
    return SIPP_OK;
}

static char *base64(const unsigned char *data, size_t n) {
    char *out = malloc(B64_ROOM(n));
    if (out) EVP_EncodeBlock((unsigned char *)out, data, (int)n);
    return out;
}

/* Decodes base64 of exactly `want` bytes into out; false otherwise. */
static bool unbase64(const char *s, unsigned char *out, size_t want) {
    size_t len = s ? strlen(s) : 0;
    if (len != B64_ROOM(want) - 1) return false;
    unsigned char *tmp = malloc(len);
    if (!tmp) return false;
    int n = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)len);
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    bool ok = n >= (int)want;
    if (ok) memcpy(out, tmp, want);
    free(tmp);
    return ok;
}

static EVP_PKEY *read_key(const char *path, bool private_key, char *err) {
    FILE *f = fopen(path, "r");
    if (!f) {
        sipp_fail(err, SIPP_ERR_NOT_FOUND, "cannot read key '%s': %s", path, strerror(errno));
        return NULL;
    }
    EVP_PKEY *k =
        private_key ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    if (!k || EVP_PKEY_id(k) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(k);
        sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' is not an Ed25519 %s key in PEM; make one with: openssl genpkey -algorithm ed25519 -out "
            "KEY.pem%s",
            path, private_key ? "private" : "public",
            private_key ? "" : " && openssl pkey -in KEY.pem -pubout -out PUB.pem");
        return NULL;
    }
    return k;
}

sipp_status sipp_artifact_sign(const char *dir, const char *key_path, char *err) {
    if (!dir || !key_path)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "sign needs an artifact and a key");
    char hashes[N_SIGNED][SIPP_SHA256_HEX];
    sipp_status s = hash_signed(dir, hashes, err);
    if (s != SIPP_OK) return s;
    EVP_PKEY *key = read_key(key_path, true, err);
    if (!key) return SIPP_ERR_INVALID_ARGUMENT;

    sipp_buf m = {0};
    message(hashes, &m);
    unsigned char sig[ED25519_SIG_BYTES], pub[ED25519_KEY_BYTES];
    size_t sig_len = sizeof sig, pub_len = sizeof pub;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, key) == 1 &&
              EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)m.data, m.len) == 1 &&
              EVP_PKEY_get_raw_public_key(key, pub, &pub_len) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    sipp_buf_free(&m);
    if (!ok) return sipp_fail(err, SIPP_ERR_INTERNAL, "OpenSSL could not sign with '%s'", key_path);

    char *sig64 = base64(sig, sig_len), *pub64 = base64(pub, pub_len);
    json_t *list = json_array();
    for (size_t i = 0; i < N_SIGNED; i++)
        json_array_append_new(list, json_pack("{s:s, s:s}", "file", signed_files[i], "sha256", hashes[i]));
    json_t *doc = json_pack("{s:i, s:s, s:s?, s:o, s:s?}", "format", SIGNATURE_FORMAT, "algorithm", "ed25519",
                            "public_key", pub64, "signed", list, "signature", sig64);
    free(sig64);
    free(pub64);
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    if (!doc || !join(path, sizeof path, dir, SIGNATURE_FILE)) {
        json_decref(doc);
        return sipp_fail(err, SIPP_ERR_INTERNAL, "cannot write the signature of '%s'", dir);
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ok = json_dump_file(doc, tmp, JSON_INDENT(2)) == 0 && rename(tmp, path) == 0;
    json_decref(doc);
    if (!ok) {
        remove(tmp);
        return sipp_fail(err, SIPP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    return SIPP_OK;
}

/* The signature checks: signature.json, the documents' hashes, the signature itself. */
static sipp_status check_signature(const char *dir, const char *pub_path, char *err) {
    char path[PATH_MAX];
    if (!join(path, sizeof path, dir, SIGNATURE_FILE))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "artifact path '%s' is too long", dir);
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc) {
        struct stat st;
        if (stat(path, &st) != 0)
            return sipp_fail(
                err, SIPP_ERR_NOT_FOUND,
                "artifact '%s' is not signed (no %s); sign it with sipp build --backend ... --sign "
                "KEY.pem, or sipp artifact sign %s --key KEY.pem",
                dir, SIGNATURE_FILE, dir);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "%s is not valid JSON (line %d: %s)", path,
                         jerr.line, jerr.text);
    }
    const char *alg = json_string_value(json_object_get(doc, "algorithm"));
    json_t *fmt = json_object_get(doc, "format");
    unsigned char sig[ED25519_SIG_BYTES], pub[ED25519_KEY_BYTES];
    sipp_status s = SIPP_OK;
    if (!json_is_integer(fmt) || json_integer_value(fmt) != SIGNATURE_FORMAT || !alg ||
        strcmp(alg, "ed25519") != 0 ||
        !unbase64(json_string_value(json_object_get(doc, "signature")), sig, sizeof sig) ||
        !unbase64(json_string_value(json_object_get(doc, "public_key")), pub, sizeof pub))
        s = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                      "%s is not a sipp Ed25519 signature (format %d, with \"signature\" and \"public_key\")",
                      path, SIGNATURE_FORMAT);
    char hashes[N_SIGNED][SIPP_SHA256_HEX];
    if (s == SIPP_OK) s = hash_signed(dir, hashes, err);
    /* A document whose hash differs from the one signed is named before the signature is checked. */
    for (size_t i = 0; i < N_SIGNED && s == SIPP_OK; i++) {
        json_t *entry = json_array_get(json_object_get(doc, "signed"), i);
        const char *file = json_string_value(json_object_get(entry, "file"));
        const char *sha = json_string_value(json_object_get(entry, "sha256"));
        if (!file || strcmp(file, signed_files[i]) != 0 || !sha)
            s = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "%s does not list %s as signed", path,
                          signed_files[i]);
        else if (strcmp(sha, hashes[i]) != 0)
            s = sipp_fail(err, SIPP_ERR_BACKEND,
                          "artifact '%s': %s differs from the signed one (sha256 %.16s..., signed %.16s...)",
                          dir, signed_files[i], hashes[i], sha);
    }
    json_decref(doc);
    if (s != SIPP_OK) return s;

    EVP_PKEY *key = NULL;
    if (pub_path) {
        key = read_key(pub_path, false, err);
        if (!key) return SIPP_ERR_INVALID_ARGUMENT;
        unsigned char want[ED25519_KEY_BYTES];
        size_t n = sizeof want;
        if (EVP_PKEY_get_raw_public_key(key, want, &n) != 1 || n != sizeof want ||
            memcmp(want, pub, n) != 0) {
            EVP_PKEY_free(key);
            return sipp_fail(err, SIPP_ERR_BACKEND, "artifact '%s' is signed by another key than '%s'", dir,
                             pub_path);
        }
    } else {
        key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, sizeof pub);
        if (!key) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "%s names no usable public key", path);
    }
    sipp_buf m = {0};
    message(hashes, &m);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1 &&
              EVP_DigestVerify(ctx, sig, sizeof sig, (const unsigned char *)m.data, m.len) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    sipp_buf_free(&m);
    if (!ok)
        return sipp_fail(
            err, SIPP_ERR_BACKEND,
            "artifact '%s': %s does not verify (the signature or the hashes it signs were changed)", dir,
            SIGNATURE_FILE);
    return SIPP_OK;
}

static bool listed(json_t *names, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v) if (strcmp(json_string_value(v), name) == 0) return true;
    return false;
}

static bool is_meta(const char *name) {
    if (strcmp(name, SIGNATURE_FILE) == 0) return true;
    for (size_t i = 0; i < N_SIGNED; i++)
        if (strcmp(name, signed_files[i]) == 0) return true;
    return false;
}

/* Every file the SBOM lists has its hash, and nothing unlisted is there. */
static sipp_status check_files(const char *dir, char *err) {
    char path[PATH_MAX];
    join(path, sizeof path, dir, "sbom.spdx.json");
    json_t *sbom = json_load_file(path, 0, NULL);
    json_t *files = json_object_get(sbom, "files");
    if (!json_is_array(files)) {
        json_decref(sbom);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "%s has no \"files\" list", path);
    }
    json_t *names = json_array();
    sipp_status s = SIPP_OK;
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f) {
        const char *fn = json_string_value(json_object_get(f, "fileName")), *want = NULL;
        if (fn && strncmp(fn, "./", 2) == 0) fn += 2;
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(f, "checksums"), k, c) {
            const char *alg = json_string_value(json_object_get(c, "algorithm"));
            if (alg && strcmp(alg, "SHA256") == 0)
                want = json_string_value(json_object_get(c, "checksumValue"));
        }
        if (!fn || !*fn || strchr(fn, '/') || !want) {
            s = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "%s lists a file without a plain name and a SHA256",
                          path);
            break;
        }
        char fp[PATH_MAX], got[SIPP_SHA256_HEX], ignored[SIPP_ERROR_SIZE];
        join(fp, sizeof fp, dir, fn);
        json_array_append_new(names, json_string(fn));
        if (sipp_sha256_file(fp, got, ignored) != SIPP_OK) {
            s = sipp_fail(err, SIPP_ERR_BACKEND,
                          "artifact '%s': %s is listed in the signed SBOM but cannot be read", dir, fn);
            break;
        }
        if (strcmp(got, want) != 0) {
            s = sipp_fail(err, SIPP_ERR_BACKEND,
                          "artifact '%s': %s differs from the signed SBOM (sha256 %.16s..., signed %.16s...)",
                          dir, fn, got, want);
            break;
        }
    }
    DIR *dh = s == SIPP_OK ? opendir(dir) : NULL;
    struct dirent *e;
    while (dh && s == SIPP_OK && (e = readdir(dh))) {
        if (e->d_name[0] == '.' || is_meta(e->d_name) || listed(names, e->d_name)) continue;
        char fp[PATH_MAX], real[PATH_MAX], real_dir[PATH_MAX];
        join(fp, sizeof fp, dir, e->d_name);
        struct stat st;
        if (lstat(fp, &st) == 0 && S_ISLNK(st.st_mode) && realpath(fp, real) && realpath(dir, real_dir)) {
            char *slash = strrchr(real, '/');
            if (slash && (size_t)(slash - real) == strlen(real_dir) &&
                strncmp(real, real_dir, strlen(real_dir)) == 0 && listed(names, slash + 1))
                continue;
        }
        s = sipp_fail(err, SIPP_ERR_BACKEND, "artifact '%s': %s is not in the signed SBOM", dir, e->d_name);
    }
    if (dh) closedir(dh);
    json_decref(names);
    json_decref(sbom);
    return s;
}

sipp_status sipp_artifact_verify(const char *dir, const char *pub_path, char *err) {
    if (!dir) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "verify needs an artifact directory");
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sipp_fail(err, SIPP_ERR_NOT_FOUND, "artifact '%s' is not a directory", dir);
    sipp_status s = check_signature(dir, pub_path, err);
    return s != SIPP_OK ? s : check_files(dir, err);
}
