/*
 * ollama.c: Ollama's API, what a large body of editors and desktop tools speak (its model routes,
 * version, tags, ps, show, pull and delete, are ollama_models.c's):
 * GET /api/version, /api/tags, /api/ps; POST /api/show, /api/chat, /api/generate, /api/embed,
 * /api/embeddings (legacy), /api/pull; DELETE /api/delete.
 *
 * Names. A target "tiny" answers to "tiny" and "tiny:latest" (Ollama's default tag); a target whose
 * name has a tag of its own ("qwen:7b") answers to exactly that. Replies echo the name the client
 * used. /api/tags and /api/ps list the local targets (remote ones are reached through
 * /v1/chat/completions); a model that /api/pull puts into the store is served once a target names
 * it (`sipp serve NAME`).
 *
 * Generation. /api/chat and /api/generate become chat-completions bodies (translate.c); raw
 * generate prompts become completions. options map one to one (num_predict -> max_tokens,
 * temperature, top_k, top_p, min_p, seed, stop, repeat_penalty, presence_penalty,
 * frequency_penalty); num_ctx is honoured when it is the target's context size and refused
 * otherwise (the context is fixed per target); options that only
 * tune speed (num_thread, num_batch, num_gpu, main_gpu, use_mmap, use_mlock, numa) are accepted and
 * ignored; any other option is refused by name. Ollama's own defaults apply where a request gives
 * none (temperature 0.8, top_k 40, top_p 0.9, repeat_penalty 1.1). format ("json" or a schema) is
 * response_format, think the template's thinking switch (or effort), tools chat's tools; history
 * tool_calls get ids here (Ollama's carry none) and each tool message answers the oldest unanswered
 * call. stream defaults to true: one JSON object per line (application/x-ndjson) with content and
 * thinking as they come, the answer's tool calls whole in one line, and last a line with done:
 * true, done_reason and the timings in nanoseconds.
 *
 * keep_alive, as Ollama reads it (seconds as a number, or a Go duration string: "5m", "10s", "1h",
 * "300ms"; 0 = unload when this request ends, negative = stay loaded), becomes the target's keep-alive
 * in residency.c once the request holds a use of it (gw_call_target); a request without one sets the
 * target's own back, as each Ollama request carries its own. keep_alive 0 with an empty prompt or no
 * messages unloads the model (done_reason "unload"; after its running requests when it has any)
 * without loading it first. Anything else is refused naming keep_alive, and so is any keep_alive for
 * a remote target (its upstream decides what stays loaded). /api/ps lists only loaded targets, with
 * expires_at from the residency deadline and size/size_vram from the memory the load measured;
 * /api/show describes a model from its GGUF header, loaded or not, without loading it (as Ollama
 * does). template (a Modelfile template per request), suffix and context are refused unless
 * empty: sipp renders with the model's own template and has no fill-in-the-middle. images (chat
 * messages' and generate's: base64 strings) become chat image parts before the message's text, for
 * a target with a projector (mmproj); a raw prompt takes none.
 *
 * Errors are Ollama's {"error": "..."} with its statuses (400 for a bad request, 404 for an unknown
 * model); an error after a stream began is one more line holding {"error": ...}.
 *
 * /api/pull downloads into the model store (sipp_store_pull, what `sipp pull` uses)
 * on a thread of its own, and streams its progress as Ollama's status lines; a client that goes
 * away cancels the download (the partial file stays for the next pull to resume).
 *
 * Who may change what (docs/gateway.md): the store and the set of loaded models are shared by every
 * caller, so /api/pull, /api/delete and the explicit unload (keep_alive 0 with nothing to run) need
 * the admin scope, as POST /v1/models/{name}/unload does. A pull is public_only (https and public
 * addresses, unless [store] allow_private_sources) and keep_existing: it never replaces a file a
 * target serves, or any model the store has; an admin replaces one on the host (sipp pull --force)
 * and then unloads the target. A failure of the source is a 502 naming it.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/api/api.h"

#define LATEST_TAG ":latest"
#define NAME_SIZE 256
#define NS_PER_MS 1e6
#define OLLAMA_TEMPERATURE 0.8
#define OLLAMA_TOP_K 40
#define OLLAMA_TOP_P 0.9
#define OLLAMA_REPEAT_PENALTY 1.1

static const gw_rename renames[] = {
    {"max_tokens", "options.num_predict"},
    {"temperature", "options.temperature"},
    {"top_k", "options.top_k"},
    {"top_p", "options.top_p"},
    {"min_p", "options.min_p"},
    {"seed", "options.seed"},
    {"stop", "options.stop"},
    {"repeat_penalty", "options.repeat_penalty"},
    {"presence_penalty", "options.presence_penalty"},
    {"frequency_penalty", "options.frequency_penalty"},
    {"response_format", "format"},
    {NULL, NULL},
};

static const char *const embed_fields[] = {"model",   "input",      "prompt",     "truncate",
                                           "options", "keep_alive", "dimensions", NULL};

/* ---- small helpers ------------------------------------------------------------------------------ */

json_t *gw_ollama_now_json(void) {
    char t[SIPP_TIME_SIZE];
    sipp_iso_time(sipp_unix_now(), t, sizeof t);
    return json_string(t);
}

/* The target a client's model name means, or NULL. */
gw_target *gw_ollama_find_target(gw_server *srv, const char *name) {
    if (!name) return NULL;
    gw_target *t = gw_target_find(srv, name);
    size_t n = strlen(name), tn = strlen(LATEST_TAG);
    if (!t && n > tn && n - tn < NAME_SIZE && strcmp(name + n - tn, LATEST_TAG) == 0) {
        char base[NAME_SIZE];
        memcpy(base, name, n - tn);
        base[n - tn] = 0;
        t = gw_target_find(srv, base);
    }
    return t;
}

/* The name under which a target is listed: with a tag, as Ollama's names have one. */
json_t *gw_ollama_listed_name(const gw_target *t) {
    if (strchr(t->cfg->name, ':')) return json_string(t->cfg->name);
    char n[NAME_SIZE];
    snprintf(n, sizeof n, "%s%s", t->cfg->name, LATEST_TAG);
    return json_string(n);
}

/* Resolves the request's model to a local target and takes an admission permit; replies and
 * returns NULL when it cannot. */
static gw_target *request_target(gw_call *call, const char *name) {
    if (!name || !*name) {
        gw_reply_invalid_field(call, "'model' is missing: name one of the models GET /api/tags lists");
        return NULL;
    }
    gw_target *t = gw_ollama_find_target(call->srv, name);
    if (!t) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET, "model '%s' not found; GET /api/tags lists the models",
                       name);
        return NULL;
    }
    return gw_translated_target(call, t->cfg->name, GW_OLLAMA_API_NAME);
}

const char *gw_ollama_body_model(json_t *root) {
    const char *m = json_string_value(json_object_get(root, "model"));
    return m ? m : json_string_value(json_object_get(root, "name")); /* older clients send "name" */
}

/* ---- options ------------------------------------------------------------------------------------ */

/* keep_alive (see the top): into call->keep_alive, which gw_call_target hands to the target. t is
 * the target the request names (NULL when it names none: that is refused later). */
static bool read_keep_alive(gw_call *call, json_t *root, const gw_target *t) {
    json_t *ka = json_object_get(root, "keep_alive");
    call->keep_alive = GW_KEEP_ALIVE_DEFAULT;
    if (!ka || json_is_null(ka)) return true;
    double s = 0;
    bool ok = json_is_number(ka) ? isfinite(s = json_number_value(ka)) && s <= GW_DURATION_MAX_S
                                 : json_is_string(ka) && gw_parse_go_duration(json_string_value(ka), &s);
    if (ok && t && !gw_kind_of(t)->resident)
        return gw_reply_invalid_field(
            call,
            "'keep_alive' cannot be honoured for model '%s': it is served by a remote upstream, "
            "which decides what stays loaded; leave it out",
            t->cfg->name);
    if (ok) {
        call->keep_alive = GW_KEEP_ALIVE_GIVEN;
        call->keep_alive_s = s < 0 ? GW_KEEP_ALIVE_FOREVER : s;
        return true;
    }
    char *shown = json_dumps(ka, JSON_ENCODE_ANY);
    gw_reply_invalid_field(
        call,
        "'keep_alive' %.64s is not a duration: give seconds (300), a duration (\"5m\", \"10s\", \"1h\"), 0 "
        "to unload the model after this request, or a negative value to keep it loaded",
        shown ? shown : "?");
    free(shown);
    return false;
}

static bool unloads(const gw_call *call) {
    return call->keep_alive == GW_KEEP_ALIVE_GIVEN && call->keep_alive_s == 0;
}

/* options -> chat fields, with Ollama's defaults. */
static bool translate_options(gw_call *call, json_t *root, const gw_target_config *tc, json_t *chat) {
    static const struct {
        const char *option, *field;
    } mapped[] = {{"num_predict", "max_tokens"},
                  {"temperature", "temperature"},
                  {"top_k", "top_k"},
                  {"top_p", "top_p"},
                  {"min_p", "min_p"},
                  {"seed", "seed"},
                  {"stop", "stop"},
                  {"repeat_penalty", "repeat_penalty"},
                  {"presence_penalty", "presence_penalty"},
                  {"frequency_penalty", "frequency_penalty"}};
    static const char *const speed_only[] = {"num_thread", "num_batch", "num_gpu",  "main_gpu", "use_mmap",
                                             "use_mlock",  "numa",      "low_vram", NULL};
    json_object_set_new(chat, "temperature", json_real(OLLAMA_TEMPERATURE));
    json_object_set_new(chat, "top_k", json_integer(OLLAMA_TOP_K));
    json_object_set_new(chat, "top_p", json_real(OLLAMA_TOP_P));
    json_object_set_new(chat, "repeat_penalty", json_real(OLLAMA_REPEAT_PENALTY));
    json_t *opts = json_object_get(root, "options");
    if (!opts || json_is_null(opts)) return true;
    if (!json_is_object(opts))
        return gw_reply_invalid_field(call, "'options' must be an object such as {\"temperature\": 0}");
    const char *key;
    json_t *v;
    json_object_foreach(opts, key, v) {
        bool done = false;
        for (size_t i = 0; i < sizeof mapped / sizeof mapped[0] && !done; i++) {
            if (strcmp(key, mapped[i].option) != 0) continue;
            done = true;
            /* num_predict -1 (and -2, "until the context is full") is no limit. */
            if (strcmp(key, "num_predict") == 0 && json_is_integer(v) && json_integer_value(v) < 0)
                json_object_del(chat, "max_tokens");
            else
                json_object_set(chat, mapped[i].field, v);
        }
        for (const char *const *s = speed_only; *s && !done; s++)
            done = strcmp(key, *s) == 0;
        if (done) continue;
        if (strcmp(key, "num_ctx") == 0) {
            if (tc->ctx_size > 0 && json_is_integer(v) && json_integer_value(v) == tc->ctx_size) continue;
            if (tc->ctx_size > 0)
                return gw_reply_invalid_field(
                    call,
                    "'options.num_ctx' must be this model's context size (%d): it is fixed per "
                    "target (ctx_size)",
                    tc->ctx_size);
            return gw_reply_invalid_field(
                call, "'options.num_ctx' cannot be honoured: the context size is fixed per target "
                      "(set ctx_size in its [[targets]] entry and leave num_ctx out)");
        }
        return gw_reply_invalid_field(call, "'options.%s' is not supported by this server; leave it out",
                                      key);
    }
    return true;
}

static bool translate_format(gw_call *call, json_t *root, json_t *chat) {
    json_t *f = json_object_get(root, "format");
    if (!f || json_is_null(f) || (json_is_string(f) && !*json_string_value(f))) return true;
    if (json_is_string(f) && strcmp(json_string_value(f), "json") == 0)
        json_object_set_new(chat, "response_format", json_pack("{s:s}", "type", "json_object"));
    else if (json_is_object(f))
        json_object_set_new(chat, "response_format",
                            json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name",
                                      "format", "schema", f));
    else
        return gw_reply_invalid_field(call, "'format' must be \"json\" or a JSON schema object");
    return true;
}

/* think: true/false is the template's thinking switch; "low" | "medium" | "high" its effort. */
static bool translate_think(gw_call *call, json_t *root, json_t *chat) {
    json_t *th = json_object_get(root, "think");
    if (!th || json_is_null(th)) return true;
    if (json_is_boolean(th)) {
        json_object_set_new(chat, "chat_template_kwargs", json_pack("{s:O}", "enable_thinking", th));
        return true;
    }
    const char *e = json_string_value(th);
    if (e && (strcmp(e, "low") == 0 || strcmp(e, "medium") == 0 || strcmp(e, "high") == 0)) {
        json_object_set_new(chat, "reasoning_effort", json_string(e));
        return true;
    }
    return gw_reply_invalid_field(call, "'think' must be true, false, \"low\", \"medium\" or \"high\"");
}

/* An optional string field that must be empty when present. */
static bool empty_only(gw_call *call, json_t *root, const char *key, const char *why) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v) || (json_is_string(v) && !*json_string_value(v)) ||
        (json_is_array(v) && json_array_size(v) == 0))
        return true;
    return gw_reply_invalid_field(call, "'%s' is not supported: %s", key, why);
}

#define IMAGES_PATH_SIZE 48 /* "messages[N].images" */

/* Whether an images field holds any (absent, null and [] hold none). */
static bool has_images(json_t *images) {
    return images && !json_is_null(images) && !(json_is_array(images) && json_array_size(images) == 0);
}

/* A message's images (where names them: "messages[0].images", "images"), base64 strings without a
 * media type, become chat image parts before its text (msg's content; libsipp reads the type from
 * the bytes). False after replying. */
static bool add_images(gw_call *call, json_t *images, const char *where, json_t *msg) {
    if (!json_is_array(images))
        return gw_reply_invalid_field(call, "'%s' must be an array of base64 strings", where);
    json_t *parts = json_array();
    size_t k;
    json_t *img;
    json_array_foreach(images, k, img) {
        if (!json_is_string(img) || !json_string_length(img)) {
            json_decref(parts);
            return gw_reply_invalid_field(call, "'%s[%zu]' must be an image as a base64 string", where, k);
        }
        json_array_append_new(parts, gw_image_part_base64(NULL, json_string_value(img)));
    }
    json_t *text = json_object_get(msg, "content");
    if (json_is_string(text)) gw_parts_add_text(parts, json_string_value(text), json_string_length(text));
    json_object_set_new(msg, "content", parts);
    return true;
}

/* ---- rendering ---------------------------------------------------------------------------------- */

typedef struct ollama_state {
    char *model; /* the name the client used */
    bool chat;   /* /api/chat (message) or /api/generate (response) */
} ollama_state;

static void state_free(void *p) {
    ollama_state *s = p;
    if (!s) return;
    free(s->model);
    free(s);
}

static const ollama_state *st_of(const gw_gen_view *v) { return v->gen->route; }

/* One line: content and thinking text (either may be NULL), and tool calls (stolen, NULL: none). */
static json_t *line(const gw_gen_view *v, const char *text, const char *thinking, json_t *calls, bool done) {
    const ollama_state *s = st_of(v);
    json_t *j = json_pack("{s:s, s:o}", "model", s->model, "created_at", gw_ollama_now_json());
    if (s->chat) {
        json_t *m = json_pack("{s:s, s:s}", "role", "assistant", "content", text ? text : "");
        if (thinking) json_object_set_new(m, "thinking", json_string(thinking));
        if (calls) json_object_set_new(m, "tool_calls", calls);
        json_object_set_new(j, "message", m);
    } else {
        json_object_set_new(j, "response", json_string(text ? text : ""));
        if (thinking) json_object_set_new(j, "thinking", json_string(thinking));
        json_decref(calls);
    }
    json_object_set_new(j, "done", json_boolean(done));
    return j;
}

void gw_ollama_append_line(sipp_buf *out, json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) return;
    sipp_buf_append(out, s, strlen(s));
    sipp_buf_append(out, "\n", 1);
    free(s);
}

/* The answer's tool calls in Ollama's shape, arguments as objects (NULL when there are none). */
static json_t *tool_calls(const gw_gen_view *v) {
    gw_answer a;
    gw_view_answer(v, &a);
    if (!a.n_calls) return NULL;
    json_t *out = json_array();
    for (size_t k = 0; k < a.n_calls; k++) {
        gw_tool_call c;
        gw_view_call(v, k, &c);
        json_array_append_new(out, json_pack("{s:s, s:{s:I, s:s, s:o}}", "id", c.id, "function", "index",
                                             (json_int_t)k, "name", c.name, "arguments",
                                             gw_arguments_object(c.arguments)));
    }
    return out;
}

static json_t *final_line(const gw_gen_view *v, const char *text, const char *thinking, json_t *calls) {
    sipp_request_stats st;
    gw_view_stats(v, &st);
    json_t *j = line(v, text, thinking, calls, true);
    bool length = strcmp(v->choices[0].finish, "length") == 0;
    json_object_set_new(j, "done_reason", json_string(length ? "length" : "stop"));
    json_object_set_new(j, "total_duration", json_integer((json_int_t)(st.total_ms * NS_PER_MS)));
    json_object_set_new(j, "load_duration", json_integer(0));
    json_object_set_new(j, "prompt_eval_count", json_integer(st.prompt_tokens));
    json_object_set_new(j, "prompt_eval_duration", json_integer((json_int_t)(st.prefill_ms * NS_PER_MS)));
    json_object_set_new(j, "eval_count", json_integer(st.generated_tokens));
    json_object_set_new(j, "eval_duration", json_integer((json_int_t)(st.decode_ms * NS_PER_MS)));
    return j;
}

static void ol_begin(const gw_gen_view *v, sipp_buf *out) {}

/* Text and thinking stream as they come; tool calls are sent whole at the end, as Ollama sends them. */
static void ol_text(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    gw_ollama_append_line(out, line(v, text, NULL, NULL, false));
}

static void ol_reasoning(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    gw_ollama_append_line(out, line(v, NULL, text, NULL, false));
}

static void ol_tool_start(const gw_gen_view *v, const char *id, const char *name, sipp_buf *out) {}
static void ol_tool_args(const gw_gen_view *v, const char *args, size_t len, sipp_buf *out) {}

static void ol_end(const gw_gen_view *v, sipp_buf *out) {
    json_t *calls = tool_calls(v);
    if (calls) gw_ollama_append_line(out, line(v, "", NULL, calls, false));
    gw_ollama_append_line(out, final_line(v, "", NULL, NULL));
}

static void ol_fail(const gw_gen_view *v, gw_error_kind kind, const char *msg, sipp_buf *out) {
    gw_ollama_append_line(out, gw_error_json_in(GW_DIALECT_OLLAMA, kind, msg));
}

static json_t *ol_whole(const gw_gen_view *v) {
    gw_answer a;
    gw_view_answer(v, &a);
    return final_line(v, a.text, a.reasoning, tool_calls(v));
}

static const gw_format ollama_format = GW_EVENT_FORMAT(ol, "ollama-", GW_OLLAMA_NDJSON, renames);

/* ---- chat and generate -------------------------------------------------------------------------- */

/* Ollama's tool calls carry no ids: each call gets one here, and a tool message answers the
 * oldest call not yet answered, which is how Ollama's templates pair them. */
static bool translate_messages(gw_call *call, json_t *msgs, json_t *chat) {
    if (!json_is_array(msgs))
        return gw_reply_invalid_field(call, "'messages' must be an array of {\"role\", \"content\"} objects");
    json_t *out = json_array();
    json_object_set_new(chat, "messages", out);
    json_t *pending = json_array(); /* ids of calls not yet answered */
    size_t n_calls = 0, answered = 0, i;
    json_t *m;
    bool ok = true;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            ok = gw_reply_invalid_field(call,
                                        "'messages[%zu]' must be an object with \"role\" and \"content\"", i);
            break;
        }
        json_t *images = json_object_get(m, "images"), *calls = json_object_get(m, "tool_calls");
        json_t *copy = json_object();
        json_array_append_new(out, copy);
        gw_copy_field(m, "role", copy, NULL);
        gw_copy_field(m, "content", copy, NULL);
        gw_copy_field(m, "thinking", copy, "reasoning_content");
        char where[IMAGES_PATH_SIZE];
        snprintf(where, sizeof where, "messages[%zu].images", i);
        if (has_images(images) && !add_images(call, images, where, copy)) {
            ok = false;
            break;
        }
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && strcmp(role, "tool") == 0) {
            json_t *id = json_array_get(pending, answered);
            if (!id) {
                ok = gw_reply_invalid_field(
                    call, "'messages[%zu]' is a tool message, but no tool call before it is unanswered", i);
                break;
            }
            answered++;
            json_object_set(copy, "tool_call_id", id);
            continue;
        }
        if (!calls || json_is_null(calls)) continue;
        if (!json_is_array(calls)) {
            ok = gw_reply_invalid_field(
                call,
                "'messages[%zu].tool_calls' must be an array of {\"function\": {\"name\", \"arguments\"}}",
                i);
            break;
        }
        json_t *chat_calls = json_array();
        json_object_set_new(copy, "tool_calls", chat_calls);
        size_t k;
        json_t *c;
        json_array_foreach(calls, k, c) {
            json_t *fn = json_object_get(c, "function"), *args = json_object_get(fn, "arguments");
            if (!json_is_string(json_object_get(fn, "name")) || (args && !json_is_object(args))) {
                ok = gw_reply_invalid_field(
                    call,
                    "'messages[%zu].tool_calls[%zu]' must be {\"function\": {\"name\", "
                    "\"arguments\": {...}}}",
                    i, k);
                break;
            }
            char id[NAME_SIZE];
            snprintf(id, sizeof id, "call_%zu", n_calls++);
            char *text = args ? json_dumps(args, JSON_COMPACT) : NULL;
            json_array_append_new(
                chat_calls, json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function",
                                      "name", json_object_get(fn, "name"), "arguments", text ? text : "{}"));
            free(text);
            json_array_append_new(pending, json_string(id));
        }
        if (!ok) break;
    }
    json_decref(pending);
    return ok;
}

/* The 403 for a store or residency change by a caller without the admin scope (see the top). */
void gw_ollama_refuse_non_admin(gw_call *call, const char *what) {
    gw_reply_error(call, GW_E_ADMIN_ONLY,
                   "the token of '%s' may not %s: that needs a token with admin = true in [[tokens]]",
                   gw_auth_caller(call), what);
}

/* The reply to an empty request, which Ollama's clients send to load a model (reason "load") or,
 * with keep_alive 0, to unload it ("unload"). */
static void reply_empty(gw_call *call, const char *model, bool chat, const char *reason) {
    json_t *j = json_pack("{s:s, s:o, s:b, s:s}", "model", model, "created_at", gw_ollama_now_json(), "done",
                          1, "done_reason", reason);
    if (chat)
        json_object_set_new(j, "message", json_pack("{s:s, s:s}", "role", "assistant", "content", ""));
    else
        json_object_set_new(j, "response", json_string(""));
    gw_reply_json(call, 200, j);
}

static void run(gw_call *call, json_t *root, bool is_chat) {
    const char *model = gw_ollama_body_model(root);
    gw_target *t = gw_ollama_find_target(call->srv, model);
    /* The target's config is needed for num_ctx before the request is decoded. */
    const gw_target_config *tc = t ? t->cfg : NULL;
    json_t *chat = json_pack("{s:s}", "model", t ? t->cfg->name : (model ? model : ""));
    gw_api api = GW_API_CHAT;
    bool ok = gw_fields_check(call, root, is_chat ? gw_fields_ollama_chat : gw_fields_ollama_generate,
                              GW_OLLAMA_API_NAME) &&
              read_keep_alive(call, root, t) && translate_think(call, root, chat) &&
              translate_format(call, root, chat);
    if (ok && !model)
        ok = gw_reply_invalid_field(call, "'model' is missing: name one of the models GET /api/tags lists");
    if (ok && !tc) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET, "model '%s' not found; GET /api/tags lists the models",
                       model);
        ok = false;
    }
    ok = ok && translate_options(call, root, tc, chat);
    json_t *tools = json_object_get(root, "tools");
    if (ok && tools) json_object_set(chat, "tools", tools);
    json_t *stream = json_object_get(root, "stream");
    if (ok && stream && !json_is_boolean(stream))
        ok = gw_reply_invalid_field(call, "'stream' must be true or false");
    json_object_set_new(chat, "stream", json_boolean(!json_is_false(stream)));
    bool empty = false;
    if (ok && is_chat) {
        json_t *msgs = json_object_get(root, "messages");
        empty = !msgs || json_is_null(msgs) || (json_is_array(msgs) && json_array_size(msgs) == 0);
        if (!empty) ok = translate_messages(call, msgs, chat);
    } else if (ok) {
        ok = empty_only(
                 call, root, "template",
                 "sipp renders with the model's own chat template; use raw: true for a prompt as it is") &&
             empty_only(call, root, "suffix", "fill-in-the-middle is not available") &&
             empty_only(call, root, "context", "pass the conversation as /api/chat messages instead");
        json_t *p = json_object_get(root, "prompt"), *sys = json_object_get(root, "system"),
               *raw = json_object_get(root, "raw"), *images = json_object_get(root, "images");
        if (ok && p && !json_is_string(p)) ok = gw_reply_invalid_field(call, "'prompt' must be a string");
        if (ok && sys && !json_is_null(sys) && !json_is_string(sys))
            ok = gw_reply_invalid_field(call, "'system' must be a string");
        if (ok && raw && !json_is_boolean(raw))
            ok = gw_reply_invalid_field(call, "'raw' must be true or false");
        empty = !json_is_string(p) || !*json_string_value(p);
        if (ok && !empty && json_is_true(raw)) {
            if (sys && json_string_length(sys))
                ok = gw_reply_invalid_field(
                    call, "'system' cannot be combined with raw: true (no template is applied)");
            if (has_images(images))
                ok = gw_reply_invalid_field(
                    call, "'images' cannot be combined with raw: true (images go through the chat template)");
            api = GW_API_COMPLETION;
            json_object_set(chat, "prompt", p);
        } else if (ok && !empty) {
            json_t *msgs = json_array(), *user = json_pack("{s:s, s:O}", "role", "user", "content", p);
            if (sys && json_string_length(sys))
                json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", sys));
            json_array_append_new(msgs, user);
            json_object_set_new(chat, "messages", msgs);
            if (has_images(images)) ok = add_images(call, images, "images", user);
        }
    }
    if (!ok) {
        json_decref(chat);
        return;
    }
    if (empty) {
        json_decref(chat);
        if (!unloads(call)) {
            if (request_target(call, model)) reply_empty(call, model, is_chat, "load");
        } else if (!gw_kind_of(t)->resident || !gw_auth_allows(call, t->cfg)) {
            gw_reply_error(call, GW_E_UNKNOWN_TARGET, "model '%s' not found; GET /api/tags lists the models",
                           model);
        } else if (!gw_auth_admin(call)) {
            gw_ollama_refuse_non_admin(call, "unload models (keep_alive 0 with nothing to run)");
        } else {
            bool deferred; /* in use: it goes when its last request ends */
            gw_residency_unload(call->srv, t, &deferred);
            reply_empty(call, model, is_chat, "unload");
        }
        return;
    }
    ollama_state *s = calloc(1, sizeof *s);
    if (s) s->model = strdup(model);
    if (!s || !s->model) {
        state_free(s);
        json_decref(chat);
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    s->chat = is_chat;
    gw_dispatch_run(call, chat,
                    &(gw_dispatch){.api = api, .fmt = &ollama_format, .route = s, .route_free = state_free});
}

void gw_route_ollama_chat(gw_call *call) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    run(call, root, true);
    json_decref(root);
}

void gw_route_ollama_generate(gw_call *call) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    run(call, root, false);
    json_decref(root);
}

/* ---- embeddings --------------------------------------------------------------------------------- */

static json_t *vector(const float *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

/* Ollama's vectors are the model's own size: "dimensions" (kept as the route's state) may only name it. */
static bool dimensions_fit(gw_call *call, gw_gen *g, int n_embd) {
    json_t *dim = g->route;
    if (!dim || json_is_null(dim) || (json_is_integer(dim) && json_integer_value(dim) == n_embd)) return true;
    gw_reply_invalid_field(
        call, "'dimensions' must be this model's embedding size (%d): vectors are not shortened", n_embd);
    return false;
}

/* /api/embed: {"model", "embeddings": [[...]], durations, "prompt_eval_count"} of unit vectors. */
static void render_embed(gw_call *call, gw_target *t, gw_gen *g, const float *out, int n_embd, int n_tokens,
                         double t0_ms) {
    if (!dimensions_fit(call, g, n_embd)) return;
    json_t *rows = json_array();
    for (size_t i = 0; i < g->n_inputs; i++)
        json_array_append_new(rows, vector(out + i * (size_t)n_embd, n_embd));
    json_int_t ns = (json_int_t)((sipp_now_ms() - t0_ms) * NS_PER_MS);
    gw_reply_json(call, 200,
                  json_pack("{s:s, s:o, s:I, s:i, s:i}", "model", t->cfg->name, "embeddings", rows,
                            "total_duration", ns, "load_duration", 0, "prompt_eval_count", n_tokens));
}

/* /api/embeddings (the older route): {"embedding": [...]} as the model makes it. */
static void render_embeddings(gw_call *call, gw_target *t, gw_gen *g, const float *out, int n_embd,
                              int n_tokens, double t0_ms) {
    (void)t, (void)n_tokens, (void)t0_ms;
    if (dimensions_fit(call, g, n_embd))
        gw_reply_json(call, 200, json_pack("{s:o}", "embedding", vector(out, n_embd)));
}

static void free_json(void *j) { json_decref(j); }

static const gw_embed_format embed_format = {render_embed}, embeddings_format = {render_embeddings};

/* Checks Ollama's embed fields; the texts go on as sipp's /v1/embed body. NULL after replying. */
static json_t *embed_body(gw_call *call, json_t *root, bool legacy, const gw_target *t) {
    json_t *in = json_object_get(root, legacy ? "prompt" : "input");
    size_t n = json_is_array(in) ? json_array_size(in) : 1;
    bool ok = gw_check_fields(call, root, embed_fields, GW_OLLAMA_API_NAME) && read_keep_alive(call, root, t);
    json_t *opts = json_object_get(root, "options");
    if (ok && opts && !json_is_null(opts) && !(json_is_object(opts) && json_object_size(opts) == 0))
        ok = gw_reply_invalid_field(call, "'options' cannot change an embedding here; leave it out");
    json_t *tr = json_object_get(root, "truncate");
    if (ok && tr && !json_is_boolean(tr))
        ok = gw_reply_invalid_field(call, "'truncate' must be true or false");
    if (ok && (!in || (!json_is_string(in) && !(json_is_array(in) && !legacy)) || n == 0 ||
               n > GW_MAX_EMBED_INPUTS))
        ok =
            gw_reply_invalid_field(call, legacy ? "'prompt' must be a string"
                                                : "'input' must be a string or a non-empty array of strings");
    for (size_t i = 0; ok && json_is_array(in) && i < n; i++)
        if (!json_is_string(json_array_get(in, i)))
            ok = gw_reply_invalid_field(call, "'input[%zu]' must be a string", i);
    if (!ok) return NULL;
    /* /api/embed returns unit vectors; the legacy route returns them as the model makes them. */
    return json_pack("{s:s, s:O, s:b}", "model", t->cfg->name, "input", in, "normalize", !legacy);
}

/* Through the dispatcher like every embedding: the target's kind embeds, in Ollama's shape. */
void gw_route_ollama_embed(gw_call *call) {
    bool legacy = strcmp(call->path, "/api/embeddings") == 0;
    json_t *root = gw_body_object(call);
    if (!root) return;
    const char *model = gw_ollama_body_model(root);
    gw_target *t = model && *model ? gw_ollama_find_target(call->srv, model) : NULL;
    json_t *body = NULL, *dim = NULL;
    if (!model || !*model)
        gw_reply_invalid_field(call, "'model' is missing: name one of the models GET /api/tags lists");
    else if (!t)
        gw_reply_error(call, GW_E_UNKNOWN_TARGET, "model '%s' not found; GET /api/tags lists the models",
                       model);
    else if ((body = embed_body(call, root, legacy, t)))
        dim = json_incref(json_object_get(root, "dimensions")); /* checked once the width is known */
    json_decref(root);
    if (body)
        gw_dispatch_run(call, body,
                        &(gw_dispatch){.api = GW_API_NATIVE_EMBED,
                                       .embed_fmt = legacy ? &embeddings_format : &embed_format,
                                       .route = dim,
                                       .route_free = free_json});
}
