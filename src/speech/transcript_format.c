/*
 * transcript_format.c: a transcript as OpenAI's audio API returns it, in the five response formats.
 *
 * A pure function of the transcript, shared by `sipp transcribe` and the gateway's audio routes so that
 * both print the same bytes:
 *   json          {"text": "..."}
 *   text          the text and a newline
 *   verbose_json  task, language, duration, text, segments (id, seek, start, end, text, tokens,
 *                 avg_logprob, no_speech_prob) and, when the words were asked for, words (word, start,
 *                 end) with times in seconds
 *   srt           numbered cues, "HH:MM:SS,mmm --> HH:MM:SS,mmm", a blank line after each
 *   vtt           "WEBVTT", then cues with "HH:MM:SS.mmm"
 * A cue's text is the segment's with its leading space removed, as whisper-cli writes .srt and .vtt.
 */
#include <jansson.h>
#include <string.h>

#include "speech/speech.h"
#include "util/util.h"

#define MS_PER_SECOND 1000.0
#define MS_PER_HOUR 3600000
#define MS_PER_MINUTE 60000

static const char *const FORMAT_NAMES[] = {
    [SIPP_TRANSCRIPT_JSON] = "json",
    [SIPP_TRANSCRIPT_TEXT] = "text",
    [SIPP_TRANSCRIPT_VERBOSE_JSON] = "verbose_json",
    [SIPP_TRANSCRIPT_SRT] = "srt",
    [SIPP_TRANSCRIPT_VTT] = "vtt",
};

sipp_status sipp_transcript_format_parse(const char *name, sipp_transcript_format *out) {
    for (size_t i = 0; name && i < sizeof FORMAT_NAMES / sizeof FORMAT_NAMES[0]; i++) {
        if (strcmp(name, FORMAT_NAMES[i]) == 0) {
            *out = (sipp_transcript_format)i;
            return SIPP_OK;
        }
    }
    return SIPP_ERR_INVALID_ARGUMENT;
}

static const char *trimmed(const char *s) {
    while (*s == ' ')
        s++;
    return s;
}

static json_t *segment_json(const sipp_transcript_segment *seg, int id) {
    json_t *tokens = json_array();
    for (int i = 0; tokens && i < seg->n_tokens; i++)
        json_array_append_new(tokens, json_integer(seg->tokens[i]));
    return json_pack("{s:i, s:I, s:f, s:f, s:s, s:o, s:f, s:f}", "id", id, "seek",
                     (json_int_t)(seg->t0_ms / 10), "start", seg->t0_ms / MS_PER_SECOND, "end",
                     seg->t1_ms / MS_PER_SECOND, "text", seg->text, "tokens", tokens ? tokens : json_array(),
                     "avg_logprob", (double)seg->avg_logprob, "no_speech_prob", (double)seg->no_speech_prob);
}

static json_t *verbose_json(const sipp_transcript *tr, const char *task) {
    json_t *segs = json_array(), *words = json_array();
    bool any_words = false;
    for (int i = 0; segs && words && i < tr->n_segments; i++) {
        const sipp_transcript_segment *seg = &tr->segments[i];
        json_array_append_new(segs, segment_json(seg, i));
        for (int w = 0; w < seg->n_words; w++) {
            any_words = true;
            json_array_append_new(words, json_pack("{s:s, s:f, s:f, s:f}", "word", seg->words[w].text,
                                                   "start", seg->words[w].t0_ms / MS_PER_SECOND, "end",
                                                   seg->words[w].t1_ms / MS_PER_SECOND, "probability",
                                                   (double)seg->words[w].probability));
        }
    }
    json_t *root =
        json_pack("{s:s, s:s, s:f, s:f, s:s, s:o}", "task", task ? task : "transcribe", "language",
                  tr->language, "language_probability", (double)tr->language_prob, "duration", tr->duration,
                  "text", tr->text ? tr->text : "", "segments", segs ? segs : json_array());
    if (root && any_words) json_object_set(root, "words", words);
    json_decref(words);
    return root;
}

static char *render_json(const sipp_transcript *tr, sipp_transcript_format format, const char *task) {
    json_t *root = format == SIPP_TRANSCRIPT_JSON ? json_pack("{s:s}", "text", tr->text ? tr->text : "")
                                                  : verbose_json(tr, task);
    if (!root) return NULL;
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* "HH:MM:SS<sep>mmm" */
static bool append_time(sipp_buf *b, int64_t ms, char sep) {
    if (ms < 0) ms = 0;
    return sipp_buf_appendf(b, "%02d:%02d:%02d%c%03d", (int)(ms / MS_PER_HOUR),
                            (int)(ms / MS_PER_MINUTE % 60), (int)(ms / 1000 % 60), sep, (int)(ms % 1000));
}

static char *render_cues(const sipp_transcript *tr, bool vtt) {
    sipp_buf b = {0};
    bool ok = vtt ? sipp_buf_appendf(&b, "WEBVTT\n\n") : true;
    for (int i = 0; ok && i < tr->n_segments; i++) {
        const sipp_transcript_segment *seg = &tr->segments[i];
        if (!vtt) ok = sipp_buf_appendf(&b, "%d\n", i + 1);
        ok = ok && append_time(&b, seg->t0_ms, vtt ? '.' : ',') && sipp_buf_appendf(&b, " --> ") &&
             append_time(&b, seg->t1_ms, vtt ? '.' : ',') &&
             sipp_buf_appendf(&b, "\n%s\n\n", trimmed(seg->text));
    }
    if (!ok || !sipp_buf_append(&b, "", 0)) {
        sipp_buf_free(&b);
        return NULL;
    }
    return b.data ? b.data : strdup("");
}

char *sipp_transcript_render(const sipp_transcript *tr, sipp_transcript_format format, const char *task) {
    if (!tr) return NULL;
    switch (format) {
    case SIPP_TRANSCRIPT_JSON:
    case SIPP_TRANSCRIPT_VERBOSE_JSON: return render_json(tr, format, task);
    case SIPP_TRANSCRIPT_SRT: return render_cues(tr, false);
    case SIPP_TRANSCRIPT_VTT: return render_cues(tr, true);
    case SIPP_TRANSCRIPT_TEXT: {
        sipp_buf b = {0};
        if (!sipp_buf_appendf(&b, "%s\n", tr->text ? tr->text : "")) return NULL;
        return b.data;
    }
    }
    return NULL;
}
