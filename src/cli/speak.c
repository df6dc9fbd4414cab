/*
 * speak.c: `sipp speak MODEL|flite "text" [-o FILE]`: text to speech, written as WAV, raw PCM, FLAC,
 * MP3 or Opus.
 *
 * The voice speaks a sentence at a time (sipp_tts_speak's callback) and each sentence goes straight
 * into the encoder, so `-o -` streams to stdout as the sentences are ready (a WAV on a pipe then
 * carries placeholder sizes, as ffmpeg's does). A file is written whole at the end, with exact headers,
 * and is removed again if anything fails. One line on stderr says what was written and how fast.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "util/util.h"

typedef struct {
    cli_common c;
    const char *mmproj, *speaker, *voice, *format, *output, *language;
    sipp_speak_options speak;
    float speed;
    int sample_rate;
} speak_opts;

static bool parse_seed(cli_args *a, const cli_option *opt, void *opts) {
    return cli_uint32(a, opt->name, &((speak_opts *)opts)->speak.seed);
}

static const cli_option opt_mmproj = {.name = "--mmproj",
                                      .arg = "FILE",
                                      .kind = CLI_OPT_STRING,
                                      .offset = offsetof(speak_opts, mmproj),
                                      .help = "the projector of a Qwen3-TTS or Pocket TTS MODEL"};
static const cli_option opt_speaker = {.name = "--speaker",
                                       .arg = "WAV",
                                       .kind = CLI_OPT_STRING,
                                       .offset = offsetof(speak_opts, speaker),
                                       .help = "a clip of the voice to speak in (Qwen3-TTS, Pocket TTS)"};
static const cli_option opt_voice = {.name = "--voice",
                                     .arg = "V",
                                     .kind = CLI_OPT_STRING,
                                     .offset = offsetof(speak_opts, voice),
                                     .help = "flite's voice: kal, kal16, slt (the default), rms or awb"};
static const cli_option opt_language = {.name = "--language",
                                        .arg = "LANG",
                                        .kind = CLI_OPT_STRING,
                                        .offset = offsetof(speak_opts, language),
                                        .help = "Qwen3-TTS's language: en (the default), zh, de, ..."};
static const cli_option opt_seed = {.name = "--seed",
                                    .arg = "N",
                                    .kind = CLI_OPT_CUSTOM,
                                    .parse = parse_seed,
                                    .help = "sampling seed of a GGUF MODEL (default: random)"};
static const cli_option opt_speed = {.name = "--speed",
                                     .arg = "S",
                                     .kind = CLI_OPT_FLOAT,
                                     .offset = offsetof(speak_opts, speed),
                                     .lo = SIPP_SPEED_MIN,
                                     .hi = SIPP_SPEED_MAX,
                                     .help = "speak S times as fast, 0.25 to 4 (default 1)"};
static const cli_option opt_rate = {.name = "--sample-rate",
                                    .arg = "HZ",
                                    .kind = CLI_OPT_INT,
                                    .offset = offsetof(speak_opts, sample_rate),
                                    .lo = 8000,
                                    .hi = 192000,
                                    .help = "resample to HZ (default: the voice's own rate)"};
static const cli_option opt_format = {.name = "--format",
                                      .arg = "wav|pcm|flac|mp3|opus",
                                      .kind = CLI_OPT_CHOICE,
                                      .offset = offsetof(speak_opts, format),
                                      .help = "the encoding (default: from -o's extension, else wav)"};
static const cli_option opt_output = {
    .name = "--output",
    .arg = "FILE",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(speak_opts, output),
    .help = "where to write, also -o FILE (default speech.FORMAT; - streams to stdout)"};
static const cli_option opt_o = {.name = "-o", .like = &opt_output, .help = NULL};
static const cli_option opt_threads = {.like = &cli_opt_threads, .help = "CPU threads of a GGUF MODEL"};
static const cli_option opt_backend = {.like = &cli_opt_backend,
                                       .help = "the backend of a GGUF MODEL (default auto)"};

static const cli_option *const options[] = {
    &opt_mmproj, &opt_speaker, &opt_voice, &opt_language, &opt_seed,    &opt_speed,        &opt_rate,
    &opt_format, &opt_output,  &opt_o,     &opt_threads,  &opt_backend, &cli_opt_artifact, NULL};

static const char about[] =
    "Speaks TEXT (\"-\" reads it from stdin) with MODEL and writes the audio.\n"
    "\n"
    "MODEL is one of:\n"
    "  flite                   Debian's flite: no model file; --voice picks kal, kal16, slt, rms or awb\n"
    "  BACKBONE.gguf           a Qwen3-TTS or Pocket TTS backbone, with --mmproj its projector; speaks as\n"
    "                          llama-tts does, with its defaults (Pocket TTS needs --speaker)\n"
    "Long text is spoken a sentence at a time; with -o - each sentence is streamed as soon as it is ready.\n"
    "Formats: wav (16-bit PCM), pcm (raw s16le at 24 kHz, as OpenAI's), flac, mp3, opus (Ogg, 48 kHz).\n"
    "\n"
    "exit status: 0 success, 1 runtime failure, 2 bad usage\n";

static const cli_command command = {.name = "speak",
                                    .synopsis = "speak MODEL|flite TEXT [-o FILE] [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 2,
                                    .args_hint = "one MODEL and one TEXT (quote the text)"};

static volatile bool interrupted;
static void on_sigint(int sig) { interrupted = true; }

/* Where the audio goes while the voice speaks. */
typedef struct speak_sink {
    FILE *out;
    sipp_audio_encoder *enc;
    sipp_audio_format format;
    double start_ms, first_ms;
    size_t n_samples;
    int rate;
    bool failed;
} speak_sink;

static bool write_bytes(const void *data, size_t n, void *user) {
    speak_sink *s = user;
    if (fwrite(data, 1, n, s->out) != n) return false;
    if (s->out == stdout) fflush(stdout);
    return true;
}

static bool on_audio(const int16_t *samples, size_t n, int rate, void *user) {
    speak_sink *s = user;
    char err[SIPP_ERROR_SIZE];
    if (!s->enc &&
        sipp_audio_encoder_new(s->format, rate, s->out == stdout, write_bytes, s, &s->enc, err) != SIPP_OK) {
        cli_error("%s", err);
        s->failed = true;
        return false;
    }
    if (!s->n_samples) s->first_ms = sipp_now_ms() - s->start_ms;
    s->n_samples += n;
    s->rate = rate;
    if (sipp_audio_encoder_write(s->enc, samples, n) != SIPP_OK) {
        cli_error("%s encoder: %s", sipp_audio_format_name(s->format), sipp_audio_encoder_last_error(s->enc));
        s->failed = true;
        return false;
    }
    return true;
}

/* The format: --format, else the output's extension, else wav. */
static bool pick_format(const speak_opts *o, sipp_audio_format *f) {
    const char *name = o->format;
    const char *dot = o->output ? strrchr(o->output, '.') : NULL;
    if (!name && dot && sipp_audio_format_parse(dot + 1, f) == SIPP_OK) return true;
    if (!name && dot && !strcmp(dot, ".ogg")) name = "opus";
    if (!name) name = "wav";
    return sipp_audio_format_parse(name, f) == SIPP_OK;
}

static sipp_tts *load_voice(const speak_opts *o, const char *model) {
    sipp_tts_params p = sipp_tts_default_params();
    p.model = model;
    p.mmproj = o->mmproj;
    p.speaker = o->speaker;
    p.voice = o->voice;
    p.backend = o->c.backend;
    p.n_threads = o->c.threads;
    if (strcmp(model, "flite") != 0 && !cli_runtime_init(o->c.artifact)) return NULL;
    sipp_tts *t;
    char err[SIPP_ERROR_SIZE];
    if (sipp_tts_new(&p, &t, err) != SIPP_OK) {
        cli_error("%s", err);
        return NULL;
    }
    return t;
}

static void report(const speak_opts *o, const speak_sink *s, sipp_tts *t, double total_ms) {
    double seconds = s->rate ? (double)s->n_samples / s->rate : 0;
    fprintf(stderr,
            "sipp: wrote %s: %.2f s of speech (%s, %s %d Hz, decodes at %d Hz); first audio after %.0f ms, "
            "%.3fx real time\n",
            strcmp(o->output, "-") ? o->output : "stdout", seconds, sipp_tts_pipeline(t),
            sipp_audio_format_name(s->format), s->rate, s->enc ? sipp_audio_encoder_output_rate(s->enc) : 0,
            s->first_ms, seconds > 0 ? total_ms / 1000.0 / seconds : 0);
}

static int speak(speak_opts *o, sipp_tts *t, const char *text, speak_sink *s) {
    o->speak.voice = o->voice;
    o->speak.language = o->language;
    o->speak.speed = o->speed;
    o->speak.sample_rate = o->sample_rate;
    o->speak.cancel = &interrupted;
    o->speak.on_audio = on_audio;
    o->speak.user = s;
    s->start_ms = sipp_now_ms();
    sipp_status st = sipp_tts_speak(t, text, &o->speak, NULL, NULL, NULL);
    if (st == SIPP_OK && s->enc && sipp_audio_encoder_finish(s->enc) != SIPP_OK) {
        cli_error("%s encoder: %s", sipp_audio_format_name(s->format), sipp_audio_encoder_last_error(s->enc));
        return EXIT_RUNTIME;
    }
    if (st != SIPP_OK) {
        if (!s->failed) cli_error("%s", sipp_tts_last_error(t));
        return EXIT_RUNTIME;
    }
    report(o, s, t, sipp_now_ms() - s->start_ms);
    return EXIT_OK;
}

static int run_speak(speak_opts *o, const char *model, const char *text) {
    sipp_tts *t = load_voice(o, model);
    if (!t) return EXIT_RUNTIME;
    speak_sink s = {.out = stdout};
    pick_format(o, &s.format);
    bool to_file = strcmp(o->output, "-") != 0;
    if (to_file && !(s.out = fopen(o->output, "wb"))) {
        cli_error("cannot write %s: %s", o->output, strerror(errno));
        sipp_tts_free(t);
        return EXIT_RUNTIME;
    }
    int rc = speak(o, t, text, &s);
    sipp_audio_encoder_free(s.enc);
    if (to_file && fclose(s.out) != 0 && rc == EXIT_OK) {
        cli_error("writing %s failed: %s", o->output, strerror(errno));
        rc = EXIT_RUNTIME;
    }
    if (to_file && rc != EXIT_OK) unlink(o->output);
    sipp_tts_free(t);
    return rc;
}

int cmd_speak(int argc, char **argv) {
    speak_opts o = {.speak = sipp_speak_default_options(), .speed = 1.0f};
    const char *args[2] = {NULL, NULL};
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, args, &n_args);
    if (rc != CLI_PARSED) return rc;
    if (n_args < 2) {
        cli_error("give a MODEL (or flite) and the TEXT to speak: sipp speak flite \"Hello.\" -o hello.wav");
        return EXIT_USAGE;
    }
    char *stdin_text = NULL;
    const char *text = args[1];
    if (!strcmp(text, "-") && !(text = stdin_text = cli_read_all(stdin))) {
        cli_error("could not read the text from stdin");
        return EXIT_RUNTIME;
    }
    char default_out[32];
    sipp_audio_format f;
    if (!o.output) {
        pick_format(&o, &f);
        snprintf(default_out, sizeof default_out, "speech.%s", sipp_audio_format_name(f));
        o.output = default_out;
    }
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    rc = run_speak(&o, args[0], text);
    free(stdin_text);
    return rc;
}
