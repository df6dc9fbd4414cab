/*
 * audio.c: OpenAI's POST /v1/audio/transcriptions and /v1/audio/translations.
 *
 * A target whose kind transcribes clips itself (a whisper.cpp model) takes the form whole
 * (transcription.c: segments with times, srt and vtt, translation). On any other target the
 * transcription is made a chat, as llama-server does, below; such a target cannot translate (400).
 *
 * The request is a multipart/form-data form (multipart.c): the audio clip in "file" (WAV, MP3 or
 * FLAC, told from its bytes; the file name and the part's Content-Type are not trusted), the target
 * in "model", and language, prompt, response_format, temperature and stream. Each form field is
 * checked against the route's table (api/fields.c, docs/api-fields.md): OpenAI's fields sipp cannot
 * honour (timestamps, logprobs, chunking, speakers) are 400s naming them, as is a field no table
 * row knows.
 *
 * The form becomes a chat, as llama-server makes one (convert_transcriptions_to_chatcmpl): one
 * user message holding the instruction and the clip, chat's input_audio part. The instruction is
 * llama-server's "Transcribe audio to text", or the form's prompt instead of it, with
 * " (language: LANG)" after it when the form names a language. The chat then takes the one path
 * every chat takes (dispatch.c, generate.c): target resolution with the caller's scope, the
 * projector checks (a target without one, or whose projector encodes images only, is a 400 naming
 * the target and mmproj before its model is loaded), admission, residency, metrics.
 *
 * The answer is OpenAI's: {"text", "usage"} (json, the default), the text alone as text/plain
 * (text), or verbose_json with the language the form named and the clip's duration when it is a
 * WAV (read from its header). verbose_json has no segments: the model gives text without times,
 * and segments without true times would be made up. stream=true (json only) sends
 * transcript.text.delta events and a transcript.text.done with the text and usage, then
 * "data: [DONE]", as llama-server does. usage counts tokens, the clip's under
 * input_token_details.audio_tokens.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"
#include "gateway/fleet/fleet.h"
#include "gateway/http/http.h"
#include "util/base64.h"
#include "util/media_sniff.h"

#define API_NAME "/v1/audio/transcriptions"
#define FILE_FIELD "file"
#define ARRAY_SUFFIX "[]"                          /* a repeated field's name, as clients write arrays */
#define ASR_INSTRUCTION "Transcribe audio to text" /* llama-server's (common_chat_get_asr_prompt) */
#define LANGUAGE_SIZE 36 /* a language code such as "en" or "zh-Hant", with its NUL */
#define NUMBER_SIZE 64
#define TEXT_TYPE "text/plain; charset=utf-8"

/* The part of the request the answer renders, reached through gw_gen.route. */
typedef enum { FORMAT_JSON, FORMAT_TEXT, FORMAT_VERBOSE } answer_format;
typedef struct asr_state {
    answer_format format;
    char language[LANGUAGE_SIZE]; /* "" when the form names none */
    double seconds;               /* the clip's duration; < 0 when its header does not say */
} asr_state;

/* Engine and parser errors name the chat's fields; the client sent a form. */
static const gw_rename renames[] = {
    {"messages[0].content[1].input_audio.data", FILE_FIELD},
    {"messages[0].content[1].input_audio", FILE_FIELD},
    {"messages[0].content[1]", FILE_FIELD},
    {"messages[0].content[0]", "prompt"},
    {NULL, NULL},
};

/* ---- the answer --------------------------------------------------------------------------------- */

static const asr_state *state_of(const gw_gen_view *v) { return v->gen->route; }

static json_t *usage_json(const gw_gen_view *v) {
    sipp_request_stats s;
    gw_view_stats(v, &s);
    return json_pack("{s:s, s:i, s:{s:i, s:i}, s:i, s:i}", "type", "tokens", "input_tokens", s.prompt_tokens,
                     "input_token_details", "text_tokens", s.prompt_tokens - s.media_tokens, "audio_tokens",
                     s.media_tokens, "output_tokens", s.generated_tokens, "total_tokens",
                     s.prompt_tokens + s.generated_tokens);
}

static const char *answer_text(const gw_gen_view *v) {
    gw_answer a;
    gw_view_answer(v, &a);
    return a.text;
}

static json_t *asr_whole(const gw_gen_view *v) {
    const asr_state *s = state_of(v);
    json_t *j = json_pack("{s:s}", "text", answer_text(v));
    if (s->format == FORMAT_VERBOSE) {
        json_object_set_new(j, "task", json_string("transcribe"));
        if (*s->language) json_object_set_new(j, "language", json_string(s->language));
        if (s->seconds >= 0) json_object_set_new(j, "duration", json_real(s->seconds));
    }
    json_object_set_new(j, "usage", usage_json(v));
    return j;
}

static void asr_reply(const gw_gen_view *v) {
    if (state_of(v)->format != FORMAT_TEXT) {
        gw_reply_json(v->call, 200, asr_whole(v));
        return;
    }
    const char *text = answer_text(v);
    char *body = strdup(text);
    if (!body) {
        gw_reply_error(v->call, GW_E_INTERNAL, "out of memory");
        return;
    }
    gw_reply_text(v->call, 200, TEXT_TYPE, body, strlen(body));
}

static void asr_begin(const gw_gen_view *v, sipp_buf *out) {}

static void text_event(const char *text, size_t len, sipp_buf *out) {
    gw_sse_json(out, NULL, json_pack("{s:s, s:s%}", "type", "transcript.text.delta", "delta", text, len));
}

static void asr_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    text_event(text, len, out);
}

/* Only the answer's text is a transcript: reasoning (a thinking model's) is not sent. */
static void asr_delta(const gw_gen_view *v, size_t index, const sipp_chat_delta *delta, json_t *logprobs,
                      sipp_buf *out) {
    if (delta->content && *delta->content) text_event(delta->content, strlen(delta->content), out);
}

static void asr_end(const gw_gen_view *v, sipp_buf *out) {
    gw_sse_json(out, NULL,
                json_pack("{s:s, s:s, s:o}", "type", "transcript.text.done", "text", answer_text(v), "usage",
                          usage_json(v)));
    gw_sse_done(out);
}

static void asr_fail(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out) {
    gw_sse_json(out, NULL, gw_error_json(kind, message));
}

static const gw_format asr_format = {.id_prefix = "asr-",
                                     .renames = renames,
                                     .begin = asr_begin,
                                     .piece = asr_piece,
                                     .delta = asr_delta,
                                     .end = asr_end,
                                     .fail = asr_fail,
                                     .whole = asr_whole,
                                     .reply = asr_reply};

/* ---- the form ----------------------------------------------------------------------------------- */

/* The form's fields as a JSON object, for the field table: text fields as strings (a field whose
 * name ends in "[]" as an array of them), the file as true. NULL after replying 400. */
static json_t *fields_json(gw_call *call, const gw_form *form) {
    json_t *root = json_object();
    for (size_t i = 0; i < form->n; i++) {
        const gw_form_part *p = &form->parts[i];
        size_t n = strlen(p->name), sn = strlen(ARRAY_SUFFIX);
        bool array = n > sn && strcmp(p->name + n - sn, ARRAY_SUFFIX) == 0;
        bool is_file = strcmp(p->name, FILE_FIELD) == 0;
        json_t *have = json_object_get(root, p->name);
        const char *problem = NULL;
        if (have && !array)
            problem = "is given twice in the form; give it once";
        else if (!is_file && memchr(p->data, '\0', p->len))
            problem = "holds a NUL byte; a text field is UTF-8 text";
        json_t *value = problem ? NULL : is_file ? json_true() : json_stringn(p->data, p->len);
        if (!problem && !value) problem = "is not UTF-8 text";
        if (!problem && !have &&
            json_object_set_new(root, p->name, have = array ? json_array() : json_incref(value)))
            problem = "is a field name that is not UTF-8 text";
        if (problem) {
            json_decref(value);
            json_decref(root);
            gw_reply_invalid_field(call, "'%s' %s", p->name, problem);
            return NULL;
        }
        if (array) json_array_append(have, value);
        json_decref(value);
    }
    return root;
}

/* A text field's value, or NULL when the form has none. */
static const char *field(json_t *fields, const char *name) {
    return json_string_value(json_object_get(fields, name));
}

static bool parse_format(gw_call *call, const char *f, asr_state *s) {
    if (!f || strcmp(f, "json") == 0)
        s->format = FORMAT_JSON;
    else if (strcmp(f, "text") == 0)
        s->format = FORMAT_TEXT;
    else if (strcmp(f, "verbose_json") == 0)
        s->format = FORMAT_VERBOSE;
    else if (strcmp(f, "srt") == 0 || strcmp(f, "vtt") == 0 || strcmp(f, "diarized_json") == 0)
        return gw_reply_invalid_field(call,
                                      "'response_format' '%s' is not supported: it needs timestamps (or "
                                      "speakers), and the model gives text without them; use json, text or "
                                      "verbose_json",
                                      f);
    else
        return gw_reply_invalid_field(call, "'response_format' is '%s'; use json, text or verbose_json", f);
    return true;
}

static bool parse_language(gw_call *call, const char *lang, asr_state *s) {
    if (!lang) return true;
    size_t n = strlen(lang);
    bool ok = n > 0 && n < sizeof s->language;
    for (const char *c = lang; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '-' || *c == '_';
    if (!ok)
        return gw_reply_invalid_field(call, "'language' must be a language code such as \"en\" (ISO-639-1)");
    memcpy(s->language, lang, n + 1);
    return true;
}

/* temperature and stream into the chat. */
static bool sampling_fields(gw_call *call, json_t *fields, const asr_state *s, json_t *chat) {
    const char *t = field(fields, "temperature"), *stream = field(fields, "stream");
    if (t) {
        char *end;
        double v = strtod(t, &end);
        if (!*t || *end || !isfinite(v))
            return gw_reply_invalid_field(call, "'temperature' is '%.*s'; give a number such as 0 or 0.2",
                                          NUMBER_SIZE, t);
        json_object_set_new(chat, "temperature", json_real(v));
    }
    if (stream && strcmp(stream, "true") != 0 && strcmp(stream, "false") != 0)
        return gw_reply_invalid_field(call, "'stream' is '%.*s'; give true or false", NUMBER_SIZE, stream);
    bool on = stream && strcmp(stream, "true") == 0;
    if (on && s->format != FORMAT_JSON)
        return gw_reply_invalid_field(call,
                                      "'stream' sends JSON events, so it takes response_format json; leave "
                                      "response_format out or stream false");
    json_object_set_new(chat, "stream", json_boolean(on));
    return true;
}

/* The clip: present, not empty, and audio by its bytes. Its format name into *format. */
static bool check_clip(gw_call *call, const gw_form_part *file, const char **format) {
    if (!file)
        return gw_reply_invalid_field(
            call, "'file' is missing: send the audio clip (WAV, MP3 or FLAC) as the form's file field");
    if (file->len == 0) return gw_reply_invalid_field(call, "'file' is empty");
    sipp_media_info info;
    bool known = sipp_media_sniff((const unsigned char *)file->data, file->len, &info);
    if (!known || !sipp_media_is_audio(info.kind))
        return gw_reply_invalid_field(call, "'file' is not an audio clip (WAV, MP3 or FLAC)%s%s",
                                      info.kind ? "; it looks like " : "",
                                      info.kind ? sipp_media_kind_name(info.kind) : "");
    *format = info.kind == SIPP_MEDIA_WAV ? "wav" : info.kind == SIPP_MEDIA_MP3 ? "mp3" : "flac";
    return true;
}

/* The chat of one user message: the instruction, then the clip. NULL after replying. */
static json_t *make_chat(gw_call *call, json_t *fields, const gw_form_part *file, const char *format,
                         const asr_state *s) {
    const char *prompt = field(fields, "prompt");
    sipp_buf instr = {0};
    sipp_buf_appendf(&instr, "%s", prompt && *prompt ? prompt : ASR_INSTRUCTION);
    if (*s->language) sipp_buf_appendf(&instr, " (language: %s)", s->language);
    char *b64 = sipp_base64_encode((const unsigned char *)file->data, file->len);
    json_t *parts = json_array();
    if (instr.data && b64) {
        gw_parts_add_text(parts, instr.data, instr.len);
        json_array_append_new(parts, gw_audio_part(b64, format));
    }
    sipp_buf_free(&instr);
    free(b64);
    if (json_array_size(parts) != 2) {
        json_decref(parts);
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return NULL;
    }
    json_t *chat = json_pack("{s:s, s:[{s:s, s:o}]}", "model", field(fields, "model"), "messages", "role",
                             "user", "content", parts);
    if (!chat) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return NULL;
    }
    if (!sampling_fields(call, fields, s, chat)) {
        json_decref(chat);
        return NULL;
    }
    return chat;
}

/* The form, parsed: the caller's body and its Content-Type's boundary. False after replying. */
static bool read_form(gw_call *call, gw_form *form) {
    char boundary[GW_FORM_BOUNDARY_SIZE], err[SIPP_ERROR_SIZE];
    bool not_form;
    if (!gw_multipart_boundary(gw_call_header(call, "Content-Type"), boundary, &not_form, err, sizeof err)) {
        gw_reply_error(call, not_form ? GW_E_MEDIA_TYPE : GW_E_BAD_REQUEST, "%s", err);
        return false;
    }
    if (!gw_multipart_parse(call->body, call->body_len, boundary, form, err, sizeof err)) {
        gw_reply_error(call, GW_E_BAD_REQUEST, "the multipart form: %s", err);
        return false;
    }
    return true;
}

/* The llama path: the form made a chat for a target with an audio projector. */
static void chat_path(gw_call *call, gw_form *form, json_t *fields, asr_state *s) {
    const char *format = NULL;
    const gw_form_part *file = gw_form_get(form, FILE_FIELD);
    json_t *chat = NULL;
    bool named =
        gw_fields_check(call, fields, gw_fields_transcriptions, API_NAME) &&
        (field(fields, "model") ||
         gw_reply_invalid_field(call, "'model' is missing: name a target (GET /v1/models lists them)"));
    if (!named || !parse_format(call, field(fields, "response_format"), s) ||
        !parse_language(call, field(fields, "language"), s) || !check_clip(call, file, &format)) {
        free(s);
        return;
    }
    double seconds;
    if (sipp_media_wav_seconds((const unsigned char *)file->data, file->len, &seconds)) s->seconds = seconds;
    if (!(chat = make_chat(call, fields, file, format, s))) {
        free(s);
        return;
    }
    gw_dispatch_run(call, chat,
                    &(gw_dispatch){.api = GW_API_CHAT, .fmt = &asr_format, .route = s, .route_free = free});
}

/* A translation asked of a target that cannot translate: 404 when the caller cannot see it. */
static void refuse_translation(gw_call *call, const char *model) {
    if (gw_call_lookup(call, model))
        gw_reply_invalid_field(call,
                               "'model' '%s' does not translate: /v1/audio/translations needs a whisper.cpp "
                               "model (a target with recipe = \"whispercpp\", or a ggml-*.bin whisper file)",
                               model);
}

/* Both audio routes: a target whose kind transcribes takes the form itself (transcription.c);
 * another takes the transcription as a chat (above), and cannot translate. */
static void audio_route(gw_call *call, bool translate) {
    gw_form *form = calloc(1, sizeof *form);
    asr_state *s = calloc(1, sizeof *s);
    json_t *fields = NULL;
    if (!form || !s) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        goto done;
    }
    s->seconds = -1;
    if (!read_form(call, form) || !(fields = fields_json(call, form))) goto done;
    const char *model = field(fields, "model");
    gw_target *t = model ? gw_target_find(call->srv, model) : NULL;
    if (t && gw_transcription_served(t)) {
        gw_transcription_run(call, form, fields, translate);
    } else if (translate && !model) {
        gw_reply_invalid_field(call,
                               "'model' is missing: name a whisper.cpp target (GET /v1/models lists them)");
    } else if (translate) {
        refuse_translation(call, model);
    } else {
        chat_path(call, form, fields, s);
        s = NULL;
    }
done:
    json_decref(fields);
    free(form);
    free(s);
}

void gw_route_transcriptions(gw_call *call) { audio_route(call, false); }

void gw_route_translations(gw_call *call) { audio_route(call, true); }
