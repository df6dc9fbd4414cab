/*
 * transcribe.c: `sipp transcribe MODEL FILE [OPTIONS]`: speech to text with a whisper.cpp model.
 *
 * The clip (WAV, MP3 or FLAC, any rate from 8 to 192 kHz, any channels) is read whole, measured and
 * decoded to 16 kHz mono by libsipp, and transcribed with whisper-cli's decoding defaults (beam 5, best
 * of 5, the temperature fallback), so the text and the segments' times are what whisper-cli prints for
 * the same clip, language and threads. The transcript is printed in one of OpenAI's response formats
 * (sipp_transcript_render: the same bytes the gateway's audio routes send).
 *
 * A clip that is not audio, is truncated, has no samples or is over --max-seconds, and an unknown
 * language, are one line on stderr naming the problem and exit 1; a bad flag is exit 2.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"

#define MAX_SECONDS_LIMIT 86400.0
#define BEAM_MAX 16
#define FILE_MAX_BYTES ((size_t)1 << 31) /* 2 GiB: longer than any clip max_seconds allows */

typedef struct transcribe_opts {
    cli_common c;
    const char *language;
    const char *format;
    const char *prompt;
    bool translate;
    bool words;
    int beam_size, best_of;
    float temperature;
    float max_seconds;
} transcribe_opts;

static const cli_option opt_language = {.name = "--language",
                                        .arg = "L",
                                        .kind = CLI_OPT_STRING,
                                        .offset = offsetof(transcribe_opts, language),
                                        .help = "the spoken language, an ISO 639-1 code (default: detected)"};
static const cli_option opt_translate = {.name = "--translate",
                                         .kind = CLI_OPT_FLAG,
                                         .offset = offsetof(transcribe_opts, translate),
                                         .help = "translate into English"};
static const cli_option opt_format = {.name = "--format",
                                      .arg = "json|text|verbose_json|srt|vtt",
                                      .kind = CLI_OPT_CHOICE,
                                      .offset = offsetof(transcribe_opts, format),
                                      .help = "the output, as OpenAI's response_format (default text)"};
static const cli_option opt_prompt = {.name = "--prompt",
                                      .arg = "TEXT",
                                      .kind = CLI_OPT_STRING,
                                      .offset = offsetof(transcribe_opts, prompt),
                                      .help = "an initial prompt (spellings, the previous text)"};
static const cli_option opt_words = {.name = "--words",
                                     .kind = CLI_OPT_FLAG,
                                     .offset = offsetof(transcribe_opts, words),
                                     .help = "word timestamps (in verbose_json)"};
static const cli_option opt_beam = {.name = "--beam-size",
                                    .arg = "N",
                                    .kind = CLI_OPT_INT,
                                    .offset = offsetof(transcribe_opts, beam_size),
                                    .lo = 1,
                                    .hi = BEAM_MAX,
                                    .help = "beam search width (default 5; 1: greedy)"};
static const cli_option opt_best_of = {.name = "--best-of",
                                       .arg = "N",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(transcribe_opts, best_of),
                                       .lo = 1,
                                       .hi = BEAM_MAX,
                                       .help = "candidates sampled above temperature 0 (default 5)"};
static const cli_option opt_temperature = {
    .name = "--temperature",
    .arg = "T",
    .kind = CLI_OPT_FLOAT,
    .offset = offsetof(transcribe_opts, temperature),
    .lo = 0,
    .hi = 1,
    .help = "the first temperature (default 0, then fallback in 0.2 steps)"};
static const cli_option opt_max_seconds = {.name = "--max-seconds",
                                           .arg = "S",
                                           .kind = CLI_OPT_FLOAT,
                                           .offset = offsetof(transcribe_opts, max_seconds),
                                           .lo = 0,
                                           .hi = MAX_SECONDS_LIMIT,
                                           .help = "refuse a longer clip (default: no limit)"};
static const cli_option opt_threads = {
    .like = &cli_opt_threads, .help = "CPU threads per clip (default: min(4, cores), as whisper-cli)"};

static const cli_option *const options[] = {
    &opt_language, &opt_translate,   &opt_format,      &opt_prompt,  &opt_words,       &opt_beam,
    &opt_best_of,  &opt_temperature, &opt_max_seconds, &opt_threads, &cli_opt_backend, &cli_opt_artifact,
    NULL};

static const char about[] =
    "Transcribes the speech in FILE (WAV, MP3 or FLAC) with MODEL, a whisper.cpp model (ggml-*.bin, or\n"
    "the name of one in the store: sipp pull whisper-tiny), and\n"
    "prints the transcript: text (default), json, verbose_json (language, segments with times, tokens\n"
    "and scores), srt or vtt. The decoding defaults are whisper-cli's, so the transcript is the one\n"
    "whisper-cli gives for the same clip, language and threads. `sipp-synth --whisper tiny` writes a\n"
    "model with random weights for trying it out.\n";

static const cli_command command = {.name = "transcribe",
                                    .synopsis = "transcribe MODEL FILE [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 2,
                                    .args_hint = "a MODEL and a FILE only"};

/* The whole file, its length in *n; NULL after reporting. */
static unsigned char *read_clip(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        cli_error("transcribe: cannot read '%s': %s", path, f ? "not a regular file" : strerror(errno));
        if (f) fclose(f);
        return NULL;
    }
    if ((size_t)st.st_size > FILE_MAX_BYTES) {
        cli_error("transcribe: '%s' is %lld bytes, more than any clip can be", path, (long long)st.st_size);
        fclose(f);
        return NULL;
    }
    unsigned char *data = malloc((size_t)st.st_size + 1);
    *n = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
    const bool failed = !data || ferror(f);
    fclose(f);
    if (failed) {
        cli_error("transcribe: cannot read '%s'", path);
        free(data);
        return NULL;
    }
    return data;
}

/* Transcribes and prints; the exit status. */
static int run(const transcribe_opts *o, const char *model, const char *file, sipp_transcript_format format) {
    size_t n = 0;
    unsigned char *data = read_clip(file, &n);
    if (!data) return EXIT_RUNTIME;
    const char *backend = o->c.backend ? o->c.backend : "auto";
    char err[SIPP_ERROR_SIZE];
    sipp_transcriber *t = NULL;
    sipp_transcript *tr = NULL;
    int rc = EXIT_RUNTIME;
    sipp_transcriber_params tp = sipp_transcriber_default_params();
    tp.backend = backend;
    tp.threads = o->c.threads;
    sipp_transcribe_params p = sipp_transcribe_default_params();
    p.language = o->language;
    p.translate = o->translate;
    p.prompt = o->prompt;
    p.word_timestamps = o->words;
    p.temperature = o->temperature;
    p.max_seconds = o->max_seconds;
    if (o->beam_size) p.beam_size = o->beam_size;
    if (o->best_of) p.best_of = o->best_of;
    char path[SIPP_PATH_MAX];
    if (!cli_runtime_init_for(o->c.artifact, backend)) goto done;
    /* a store name (sipp pull whisper-tiny) as well as a path */
    if (sipp_store_resolve(model, path, sizeof path, err) != SIPP_OK ||
        sipp_transcriber_new(path, &tp, &t, err) != SIPP_OK ||
        sipp_transcribe_bytes(t, data, n, file, &p, &tr, err) != SIPP_OK) {
        cli_error("transcribe: %s", err);
        goto done;
    }
    char *out = sipp_transcript_render(tr, format, o->translate ? "translate" : "transcribe");
    if (!out) {
        cli_error("transcribe: out of memory rendering the transcript");
        goto done;
    }
    fputs(out, stdout);
    if (format == SIPP_TRANSCRIPT_JSON || format == SIPP_TRANSCRIPT_VERBOSE_JSON) fputc('\n', stdout);
    sipp_free(out);
    rc = EXIT_OK;
done:
    sipp_transcript_free(tr);
    sipp_transcriber_free(t);
    free(data);
    return rc;
}

int cmd_transcribe(int argc, char **argv) {
    transcribe_opts o = {0};
    const char *args[2] = {NULL, NULL};
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, args, &n_args);
    if (rc != CLI_PARSED) return rc;
    if (n_args < 2) {
        cli_error("transcribe: %s (sipp transcribe MODEL FILE)",
                  n_args == 0 ? "no MODEL given" : "no FILE given");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE];
    if (o.c.backend && sipp_backend_check_name(o.c.backend, err) != SIPP_OK) {
        cli_error("transcribe: --backend: %s", err);
        return EXIT_USAGE;
    }
    sipp_transcript_format format = SIPP_TRANSCRIPT_TEXT;
    if (o.format) sipp_transcript_format_parse(o.format, &format); /* the choice list allows only these */
    return run(&o, args[0], args[1], format);
}
