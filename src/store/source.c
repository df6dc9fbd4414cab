/*
 * source.c: parsing what `sipp pull` is given. See source.h.
 *
 * Split sets follow llama.cpp's own convention (llama_split_path): "PREFIX-%05d-of-%05d.gguf", with
 * 1-based shard numbers. Loading the first shard makes llama.cpp open the others by that pattern in
 * the same directory, so the store keeps the pattern and only replaces PREFIX by the model's name.
 *
 * hf:// is a short form for a file in a Hugging Face repository, the way huggingface_hub and
 * llama.cpp's -hf spell it: hf://ORG/REPO/PATH, optionally pinned with @REVISION after the repo
 * (a branch, tag or commit). It maps to the "resolve" URL, which redirects to the CDN. Tests and
 * mirrors replace the host with SIPP_HF_ENDPOINT (HF_ENDPOINT, huggingface_hub's variable, is honoured
 * too), e.g. http://127.0.0.1:8080.
 */
#include "store/source.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

#define GGUF_EXT ".gguf"
#define JSON_EXT ".json"
#define SPLIT_DIGITS 5
/* "-00001-of-00003.gguf": '-' + 5 digits + "-of-" + 5 digits + ".gguf" */
#define SPLIT_SUFFIX_LEN (1 + SPLIT_DIGITS + 4 + SPLIT_DIGITS + 5)

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

bool sipp_name_valid(const char *name) {
    if (!name) return false;
    size_t n = strlen(name);
    if (n == 0 || n > SIPP_NAME_MAX || !isalnum((unsigned char)name[0])) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-') return false;
    }
    return !ends_with(name, GGUF_EXT) && !ends_with(name, JSON_EXT);
}

bool sipp_source_is_url(const char *s) {
    return s && (strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0 ||
                 strncasecmp(s, SIPP_HF_SCHEME, strlen(SIPP_HF_SCHEME)) == 0);
}

static const char *hf_endpoint(void) {
    const char *e = getenv("SIPP_HF_ENDPOINT");
    if (!e || !*e) e = getenv("HF_ENDPOINT");
    return e && *e ? e : SIPP_HF_DEFAULT_ENDPOINT;
}

/* A path segment of an hf:// source: non-empty, no "." or "..", no characters that would change the
 * URL's meaning. */
static bool hf_segment_ok(const char *s, size_t n) {
    if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == '?' || c == '#' || c == '\\' || c >= 0x7f) return false;
    }
    return true;
}

sipp_status sipp_source_to_url(const char *source, char *url, size_t cap, char *errbuf) {
    if (!source || !*source) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no source given");
    if (strncasecmp(source, SIPP_HF_SCHEME, strlen(SIPP_HF_SCHEME)) != 0) {
        if (!sipp_source_is_url(source))
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                             "'%s' is not a URL (http://, https:// or hf://ORG/REPO/FILE.gguf)", source);
        for (const char *p = source; *p; p++)
            if ((unsigned char)*p <= ' ')
                return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                                 "URL '%s' contains a space or control character", source);
        if (strlen(source) >= cap)
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "URL '%s' is too long", source);
        sipp_strlcpy(url, source, cap);
        return SIPP_OK;
    }

    /* hf://ORG/REPO[@REV]/PATH */
    const char *p = source + strlen(SIPP_HF_SCHEME);
    const char *slash1 = strchr(p, '/');
    const char *slash2 = slash1 ? strchr(slash1 + 1, '/') : NULL;
    static const char usage[] =
        "write it as hf://ORG/REPO/FILE.gguf or hf://ORG/REPO@REVISION/PATH/FILE.gguf";
    if (!slash1 || !slash2 || !slash2[1])
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "'%s' does not name a file in a repository; %s",
                         source, usage);
    const char *org = p;
    size_t org_len = (size_t)(slash1 - p);
    const char *repo = slash1 + 1;
    size_t repo_len = (size_t)(slash2 - repo);
    const char *rev = SIPP_HF_DEFAULT_REVISION;
    size_t rev_len = strlen(rev);
    const char *at = memchr(repo, '@', repo_len);
    if (at) {
        rev = at + 1;
        rev_len = (size_t)(slash2 - rev);
        repo_len = (size_t)(at - repo);
    }
    const char *path = slash2 + 1;
    bool ok = hf_segment_ok(org, org_len) && hf_segment_ok(repo, repo_len) && hf_segment_ok(rev, rev_len) &&
              memchr(org, '@', org_len) == NULL;
    for (const char *seg = path; ok && *seg;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        ok = hf_segment_ok(seg, n);
        seg = end ? end + 1 : seg + n;
        if (end && !*seg) ok = false; /* a trailing '/' names a directory */
    }
    if (!ok)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "'%s' is not a valid hf:// source; %s", source,
                         usage);

    const char *endpoint = hf_endpoint();
    size_t ep_len = strlen(endpoint);
    while (ep_len && endpoint[ep_len - 1] == '/')
        ep_len--;
    int n = snprintf(url, cap, "%.*s/%.*s/%.*s/resolve/%.*s/%s", (int)ep_len, endpoint, (int)org_len, org,
                     (int)repo_len, repo, (int)rev_len, rev, path);
    if (n < 0 || (size_t)n >= cap)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "'%s' is too long", source);
    return SIPP_OK;
}

void sipp_url_file_name(const char *url, char *out, size_t cap) {
    size_t end = strcspn(url, "?#");
    size_t start = end;
    while (start > 0 && url[start - 1] != '/')
        start--;
    /* "https://host" has no path: the last segment would be the host */
    const char *scheme_end = strstr(url, "://");
    if (scheme_end && (size_t)(scheme_end - url) + 3 >= start) start = end;
    size_t n = end - start;
    if (cap == 0) return;
    if (n >= cap) n = cap - 1;
    memcpy(out, url + start, n);
    out[n] = '\0';
}

static bool all_digits(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

bool sipp_split_parse(const char *file_name, sipp_split *out) {
    size_t n = strlen(file_name);
    if (n <= SPLIT_SUFFIX_LEN) return false; /* a split needs a non-empty prefix */
    const char *s = file_name + n - SPLIT_SUFFIX_LEN;
    if (s[0] != '-' || !all_digits(s + 1, SPLIT_DIGITS) || strncmp(s + 1 + SPLIT_DIGITS, "-of-", 4) != 0 ||
        !all_digits(s + 5 + SPLIT_DIGITS, SPLIT_DIGITS) || strcmp(s + 5 + 2 * SPLIT_DIGITS, GGUF_EXT) != 0)
        return false;
    /* both numbers are SPLIT_DIGITS digits (checked above), so strtol cannot overflow */
    int index = (int)strtol(s + 1, NULL, 10);
    int count = (int)strtol(s + 5 + SPLIT_DIGITS, NULL, 10);
    if (count < 1 || count > SIPP_SPLIT_MAX || index < 1 || index > count) return false;
    if (out) *out = (sipp_split){.index = index, .count = count, .prefix_len = n - SPLIT_SUFFIX_LEN};
    return true;
}

bool sipp_split_sibling(const char *s, int index, char *out, size_t cap) {
    char file[SIPP_URL_MAX];
    sipp_url_file_name(s, file, sizeof file);
    sipp_split sp;
    if (!sipp_split_parse(file, &sp) || index < 1 || index > sp.count) return false;
    /* The shard number sits at a fixed place in the last segment; the segment ends where the
     * query string starts. */
    size_t seg_end = strcspn(s, "?#");
    size_t num_at = seg_end - SPLIT_SUFFIX_LEN + 1;
    if (strlen(s) >= cap) return false;
    sipp_strlcpy(out, s, cap);
    char digits[16];
    snprintf(digits, sizeof digits, "%0*d", SPLIT_DIGITS, index); /* index <= SIPP_SPLIT_MAX: 5 digits */
    memcpy(out + num_at, digits, SPLIT_DIGITS);
    return true;
}

sipp_status sipp_source_default_name(const char *url, char *name, size_t cap, char *errbuf) {
    char file[SIPP_URL_MAX];
    sipp_url_file_name(url, file, sizeof file);
    size_t n = strlen(file);
    sipp_split sp;
    if (sipp_split_parse(file, &sp))
        n = sp.prefix_len;
    else if (ends_with(file, GGUF_EXT))
        n -= strlen(GGUF_EXT);
    else if (ends_with(file, SIPP_STORE_WHISPER_EXT))
        n -= strlen(SIPP_STORE_WHISPER_EXT);
    file[n] = '\0';
    if (!sipp_name_valid(file) || n >= cap)
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "cannot make a store name from '%s'; give one with --name NAME (letters, digits, '.', '_', "
            "'-')",
            url);
    sipp_strlcpy(name, file, cap);
    return SIPP_OK;
}

void sipp_store_file_name(const char *name, int index, int count, char *out, size_t cap) {
    if (count <= 1)
        snprintf(out, cap, "%s%s", name, GGUF_EXT);
    else
        snprintf(out, cap, "%s-%0*d-of-%0*d%s", name, SPLIT_DIGITS, index, SPLIT_DIGITS, count, GGUF_EXT);
}

bool sipp_source_is_whisper_file(const char *url) {
    char file[SIPP_URL_MAX];
    sipp_url_file_name(url, file, sizeof file);
    return ends_with(file, SIPP_STORE_WHISPER_EXT);
}

void sipp_store_whisper_file_name(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s%s", name, SIPP_STORE_WHISPER_EXT);
}

void sipp_store_mmproj_file_name(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s%s%s", SIPP_STORE_MMPROJ_PREFIX, name, GGUF_EXT);
}
