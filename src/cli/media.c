/*
 * media.c: images and audio files as the chat content parts libsipp takes (sipp MODEL --image,
 * --audio, and /image, /audio in the interactive chat): an image_url part with a data: URL, or an
 * input_audio part, the file's bytes in base64. libsipp reads the bytes and says what is wrong with
 * them; here only the file is read and the audio format taken from its name.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "util/base64.h"

#define MEDIA_FILE_MAX ((long)64 << 20) /* far above [limits] image_max_bytes: libsipp has the limit */
#define DATA_URL_PREFIX "data:application/octet-stream;base64,"

/* The file's bytes (malloc'ed, *n); NULL after saying why. */
static unsigned char *read_file(const char *what, const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MEDIA_FILE_MAX) {
        cli_error("%s %s: %s", what, path,
                  !f                     ? strerror(errno)
                  : !S_ISREG(st.st_mode) ? "not a file"
                                         : "larger than 64 MB");
        if (f) fclose(f);
        return NULL;
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    *n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf || *n != (size_t)st.st_size) {
        cli_error("%s %s: cannot read it", what, path);
        free(buf);
        return NULL;
    }
    return buf;
}

/* wav, mp3 or flac from the name's extension; NULL for another. */
static const char *audio_format(const char *path) {
    const char *dot = strrchr(path, '.');
    static const char *const formats[] = {"wav", "mp3", "flac"};
    for (size_t i = 0; dot && i < sizeof formats / sizeof *formats; i++)
        if (strcasecmp(dot + 1, formats[i]) == 0) return formats[i];
    return NULL;
}

json_t *cli_media_part(const char *path, bool audio) {
    const char *what = audio ? "--audio" : "--image";
    const char *format = audio ? audio_format(path) : NULL;
    if (audio && !format) {
        cli_error("--audio %s: give a .wav, .mp3 or .flac file", path);
        return NULL;
    }
    size_t n;
    unsigned char *bytes = read_file(what, path, &n);
    char *b64 = bytes ? sipp_base64_encode(bytes, n) : NULL;
    free(bytes);
    if (!b64) return NULL;
    json_t *part;
    if (audio) {
        part = json_pack("{s:s, s:{s:s, s:s}}", "type", "input_audio", "input_audio", "data", b64, "format",
                         format);
    } else {
        size_t len = strlen(DATA_URL_PREFIX) + strlen(b64) + 1;
        char *url = malloc(len);
        if (url) snprintf(url, len, DATA_URL_PREFIX "%s", b64);
        part = url ? json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url", url) : NULL;
        free(url);
    }
    free(b64);
    return part;
}
