/*
 * chat_bridge.cpp: the only C++ in sipp. It calls llama.cpp's `common` chat library and turns what
 * it returns into the plain C structs of chat_bridge.h.
 *
 * Why C++ here and nowhere else: the chat library (Jinja templates, tool-call parsers for each model
 * family, the diff of two parses, JSON-schema grammars, the reasoning budget) has a C++ interface
 * only, and re-implementing it in C would mean following every template and format llama.cpp adds.
 * So this file is a thin, mechanical adapter: strings and flags in, C structs out, and every
 * exception caught at the boundary into a sipp_status with the library's own message.
 *
 * It is compiled with g++ against exactly the headers of the pinned commit (the bundle's common/
 * and vendor/), because libllama-common.so's C++ ABI (std::string, std::vector layouts) must match.
 */
#include "chat/chat_bridge.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "chat.h"
#include "common.h"
#include "json-schema-to-grammar.h"
#include "log.h"
#include "reasoning-budget.h"

namespace {

constexpr size_t TOOL_CALL_ID_CHARS = 24;
constexpr const char *TOOL_CALL_ID_PREFIX = "call_";
/* Mistral's templates refuse a history whose tool call ids are not 9 letters or digits. */
constexpr size_t SHORT_ID_CHARS = 9;
constexpr const char *SHORT_ID_RULE = "alphanumeric strings with length 9";

struct bad_input : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/* The library's logger writes to stdout from its own thread; sipp's output is stdout. */
void silence_library() {
    static std::once_flag once;
    std::call_once(once, [] {
        common_log_set_verbosity_thold(INT_MIN);
        common_log_pause(common_log_main());
    });
}

sipp_status fail(char *err, sipp_status st, const std::string &msg) {
    if (err) snprintf(err, SIPP_ERROR_SIZE, "%s", msg.c_str());
    return st;
}

/* Runs f, turning exceptions into a status. Input problems (bad JSON, an unknown tool_choice, a
 * template error) are invalid_argument; the library's std::invalid_argument and runtime_error are
 * what it throws for those too. */
template <typename F> sipp_status guarded(char *err, const char *what, F &&f) {
    silence_library();
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    } catch (const std::exception &e) {
        std::string msg = e.what();
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
            msg.pop_back();
        for (auto &c : msg)
            if (c == '\n') c = ' ';
        /* llama.cpp's Jinja engine ends some syntax errors (a quote that closes a string early) with a
         * bare std::exception, whose text names nothing */
        if (msg.empty() || msg == "std::exception")
            msg = "llama.cpp could not parse or render it and gave no reason; check its syntax (a quote "
                  "inside a '...' string ends it early: write \\'), or give another template";
        return fail(err, SIPP_ERR_INVALID_ARGUMENT, std::string(what) + ": " + msg);
    } catch (...) {
        return fail(err, SIPP_ERR_INTERNAL,
                    std::string(what) + ": unknown failure in llama.cpp's chat library");
    }
}

char *dup(const std::string &s) {
    char *p = static_cast<char *>(malloc(s.size() + 1));
    if (!p) throw std::bad_alloc();
    memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    return p;
}

char *dup_or_null(const std::string &s) { return s.empty() ? nullptr : dup(s); }

char **dup_list(const std::vector<std::string> &v, size_t *n) {
    *n = 0;
    if (v.empty()) return nullptr;
    char **out = static_cast<char **>(calloc(v.size(), sizeof *out));
    if (!out) throw std::bad_alloc();
    for (const auto &s : v)
        out[(*n)++] = dup(s);
    return out;
}

int32_t *dup_tokens(const std::vector<llama_token> &v, size_t *n) {
    *n = v.size();
    if (v.empty()) return nullptr;
    int32_t *out = static_cast<int32_t *>(malloc(v.size() * sizeof *out));
    if (!out) throw std::bad_alloc();
    for (size_t i = 0; i < v.size(); i++)
        out[i] = v[i];
    return out;
}

void free_list(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* "call_" and 24 letters or digits, as OpenAI's; 9 of them alone for a template that demands it. */
std::string random_call_id(bool short_id) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937 rng{std::random_device{}()};
    std::uniform_int_distribution<size_t> pick(0, sizeof alnum - 2);
    std::string id = short_id ? "" : TOOL_CALL_ID_PREFIX;
    for (size_t i = 0; i < (short_id ? SHORT_ID_CHARS : TOOL_CALL_ID_CHARS); i++)
        id += alnum[pick(rng)];
    return id;
}

/* What a plan keeps for parsing its answer. */
struct answer_format {
    common_chat_parser_params params;
    bool short_ids;
};

common_reasoning_format reasoning_of(chat_reasoning r) {
    switch (r) {
    case CHAT_REASONING_NONE: return COMMON_REASONING_FORMAT_NONE;
    case CHAT_REASONING_DEEPSEEK: return COMMON_REASONING_FORMAT_DEEPSEEK;
    default: return COMMON_REASONING_FORMAT_AUTO;
    }
}

common_chat_tool_choice tool_choice_of(chat_tool_choice c) {
    switch (c) {
    case CHAT_TOOLS_REQUIRED: return COMMON_CHAT_TOOL_CHOICE_REQUIRED;
    case CHAT_TOOLS_NONE: return COMMON_CHAT_TOOL_CHOICE_NONE;
    default: return COMMON_CHAT_TOOL_CHOICE_AUTO;
    }
}

/* A text that is exactly one token of the vocabulary (special tokens included), or NULL_TOKEN. */
llama_token single_token(const llama_vocab *vocab, const std::string &text) {
    auto ids = common_tokenize(vocab, text, false, true);
    return ids.size() == 1 ? ids[0] : LLAMA_TOKEN_NULL;
}

void plan_triggers(const common_chat_params &cp, const llama_vocab *vocab, std::vector<std::string> &patterns,
                   std::vector<llama_token> &tokens) {
    for (const auto &t : cp.grammar_triggers) {
        switch (t.type) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: {
            /* A word that is one special token triggers on the token, as llama-server does. */
            llama_token tok = vocab ? single_token(vocab, t.value) : LLAMA_TOKEN_NULL;
            if (tok != LLAMA_TOKEN_NULL)
                tokens.push_back(tok);
            else
                patterns.push_back(regex_escape(t.value));
            break;
        }
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN: patterns.push_back(t.value); break;
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
            std::string p = t.value;
            if (p.empty())
                p = "^$";
            else
                p = (p.front() != '^' ? "^" : "") + p + (p.back() != '$' ? "$" : "");
            patterns.push_back(p);
            break;
        }
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN: {
            llama_token tok = t.token;
            if (tok == LLAMA_TOKEN_NULL && vocab) tok = single_token(vocab, t.value);
            if (tok != LLAMA_TOKEN_NULL)
                tokens.push_back(tok);
            else
                patterns.push_back(regex_escape(t.value));
            break;
        }
        }
    }
}

/* With tool_choice "required", llama.cpp's grammars still let free text come before the calls
 * (root ::= ... until-N? tool-calls: text up to the call marker). A model then may answer in prose
 * and never call, which is what "required" rules out; sipp takes that optional text out of the
 * root rule, so the answer is (reasoning, where the format has it, and) the tool calls. */
std::string require_calls(const std::string &grammar) {
    static const std::regex optional_text(R"( until-[0-9]+\?)");
    std::istringstream in(grammar);
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.rfind("root ::=", 0) == 0) line = std::regex_replace(line, optional_text, "");
        out += line;
        out += '\n';
    }
    return out;
}

/* With parallel_tool_calls false some of llama.cpp's grammars (the autoparser's, e.g. Qwen 2.5's)
 * still repeat the call: tool-calls ::= (tool-call space)+. sipp makes that one call, so that the
 * request's parallel_tool_calls holds. */
std::string single_call(const std::string &grammar) {
    static const std::regex repeated(R"(^(tool-calls ::= )\((.*)\)\+$)");
    std::istringstream in(grammar);
    std::string line, out;
    while (std::getline(in, line)) {
        out += std::regex_replace(line, repeated, "$1$2");
        out += '\n';
    }
    return out;
}

/* Custom tools (custom_tools.h): the grammar made from the marked tools, with each mark (the
 * literal "SIPPCUSTOMk" where the input string's content goes) replaced by the custom tool's rule,
 * and that rule's definitions added. Inside a JSON string (the mark between the string's quotes,
 * as json_schema_to_grammar writes a pattern) the rule that spells the input JSON-escaped; else the
 * rule of the text as it is. */
std::string splice_custom(std::string grammar, const chat_inputs *in) {
    static const std::string quoted = "\"\\\"\" (";
    std::string rules;
    for (size_t k = 0; k < in->n_custom; k++) {
        if (!in->custom_gbnf_json[k]) continue;
        const std::string mark = "\"" CHAT_CUSTOM_MARK + std::to_string(k) + "\"";
        bool used_json = false, used_raw = false;
        for (size_t at = grammar.find(mark); at != std::string::npos; at = grammar.find(mark, at)) {
            bool json =
                at >= quoted.size() && grammar.compare(at - quoted.size(), quoted.size(), quoted) == 0;
            std::string rule = (json ? "sipp-custom-" : "sipp-custom-raw-") + std::to_string(k);
            grammar.replace(at, mark.size(), rule);
            at += rule.size();
            (json ? used_json : used_raw) = true;
        }
        if (used_json) rules += in->custom_gbnf_json[k];
        if (used_raw) rules += in->custom_gbnf_raw[k];
    }
    if (!grammar.empty() && grammar.back() != '\n') grammar += '\n';
    return grammar + rules;
}

/* The text of a GBNF string literal starting at s[i] (the opening quote); i moves past it. */
bool gbnf_literal(const std::string &s, size_t &i, std::string &out) {
    if (i >= s.size() || s[i] != '"') return false;
    for (i++; i < s.size() && s[i] != '"'; i++) {
        if (s[i] != '\\') {
            out += s[i];
            continue;
        }
        if (++i >= s.size()) return false;
        switch (s[i]) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
            if (i + 2 >= s.size()) return false;
            out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
            break;
        }
        default: out += s[i]; /* \" \\ \[ ... */
        }
    }
    return i < s.size() && s[i++] == '"';
}

/* A grammar that the library made for a chat spells out the template's generation prompt first
 * (root ::= "<|im_start|>assistant\n" ...), which the prompt already holds. llama-server feeds the
 * grammar the prompt's tokens; but those need not match the literal character by character (a
 * SentencePiece tokenizer glues a space to the first one), so sipp takes the literal out of the
 * root rule instead. True when it did. */
bool strip_generation_prompt(std::string &grammar, const std::string &gen) {
    if (gen.empty()) return false;
    size_t at = grammar.rfind("\nroot ::= ", std::string::npos);
    at = grammar.compare(0, 9, "root ::= ") == 0 ? 0 : at == std::string::npos ? at : at + 1;
    if (at == std::string::npos) return false;
    size_t i = at + 9;
    std::string lit;
    if (!gbnf_literal(grammar, i, lit) || lit != gen) return false;
    grammar.erase(at + 9, i - (at + 9));
    return true;
}

void free_message(chat_message &m) {
    free(m.content);
    free(m.reasoning);
    for (size_t i = 0; i < m.n_tool_calls; i++) {
        free(m.tool_calls[i].id);
        free(m.tool_calls[i].name);
        free(m.tool_calls[i].arguments);
    }
    free(m.tool_calls);
    m = chat_message{};
}

} // namespace

struct chat_templates {
    common_chat_templates_ptr ptr;
};

struct chat_parser {
    common_chat_parser_params params;
    bool short_ids = false;
    std::string text;
    common_chat_msg msg;
    std::vector<std::string> ids;
    chat_message view{};
};

extern "C" {

sipp_status chat_templates_new(const struct llama_model *model, const char *source, const char *bos,
                               const char *eos, chat_templates **out, bool *fallback, char *err) {
    *out = nullptr;
    return guarded(err, "chat template", [&] {
        std::string src = source ? source : "";
        if (src.empty() && !model) throw bad_input("no model and no template given");
        bool none = src.empty() && !llama_model_chat_template(model, nullptr) &&
                    !llama_model_chat_template(model, "tool_use");
        if (fallback) *fallback = none;
        auto *t = new chat_templates{common_chat_templates_init(model, src, bos ? bos : "", eos ? eos : "")};
        if (!t->ptr) {
            delete t;
            throw bad_input("the template could not be parsed");
        }
        *out = t;
        return SIPP_OK;
    });
}

void chat_templates_free(chat_templates *t) { delete t; }

sipp_status chat_apply(const chat_templates *t, const struct llama_vocab *vocab, const chat_inputs *in,
                       chat_plan **out, char *err) {
    *out = nullptr;
    return guarded(err, "chat template", [&]() -> sipp_status {
        common_chat_templates_inputs inputs;
        inputs.messages = common_chat_msgs_parse_oaicompat(
            common_json::parse(in->messages_json ? in->messages_json : "[]"));
        if (in->tools_json && *in->tools_json)
            inputs.tools = common_chat_tools_parse_oaicompat(common_json::parse(in->tools_json));
        inputs.tool_choice = tool_choice_of(in->tool_choice);
        inputs.parallel_tool_calls = in->parallel_tool_calls;
        if (in->json_schema) inputs.json_schema = in->json_schema;
        if (in->grammar) inputs.grammar = in->grammar;
        inputs.reasoning_format = reasoning_of(in->reasoning);
        inputs.enable_thinking = in->enable_thinking;
        inputs.add_generation_prompt = in->add_generation_prompt;
        inputs.use_jinja = true;
        for (size_t i = 0; i < in->n_kwargs; i++)
            inputs.chat_template_kwargs[in->kwarg_keys[i]] = in->kwarg_values[i];

        common_chat_params cp = common_chat_templates_apply(t->ptr.get(), inputs);
        if (in->marked_tools_json && !cp.grammar.empty()) {
            common_chat_templates_inputs marked = inputs;
            marked.tools = common_chat_tools_parse_oaicompat(common_json::parse(in->marked_tools_json));
            cp.grammar = splice_custom(common_chat_templates_apply(t->ptr.get(), marked).grammar, in);
        }
        if (inputs.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED && !inputs.tools.empty() &&
            !cp.grammar.empty())
            cp.grammar = require_calls(cp.grammar);
        /* Without tools the library leaves a caller's GBNF to the caller: it is the answer's grammar. */
        if (cp.grammar.empty() && !inputs.grammar.empty()) cp.grammar = inputs.grammar;
        if (!inputs.parallel_tool_calls && !inputs.tools.empty() && !cp.grammar.empty())
            cp.grammar = single_call(cp.grammar);

        auto *fmt = new answer_format{common_chat_parser_params(cp), false};
        std::unique_ptr<answer_format> parser_guard(fmt);
        common_chat_parser_params *parser = &fmt->params;
        fmt->short_ids =
            common_chat_templates_source(t->ptr.get()).find(SHORT_ID_RULE) != std::string::npos ||
            common_chat_templates_source(t->ptr.get(), "tool_use").find(SHORT_ID_RULE) != std::string::npos;
        parser->reasoning_format = reasoning_of(in->reasoning);
        parser->parse_tool_calls =
            !inputs.tools.empty() && inputs.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE;
        if (!cp.parser.empty()) parser->parser.load(cp.parser);

        std::vector<std::string> patterns;
        std::vector<llama_token> trig_tokens, preserved;
        plan_triggers(cp, vocab, patterns, trig_tokens);
        if (vocab)
            for (const auto &s : cp.preserved_tokens) {
                llama_token tok = single_token(vocab, s);
                if (tok != LLAMA_TOKEN_NULL) preserved.push_back(tok);
            }
        if (cp.grammar_lazy && patterns.empty() && trig_tokens.empty())
            throw std::runtime_error("the template's lazy grammar has no triggers");

        chat_plan *p = static_cast<chat_plan *>(calloc(1, sizeof *p));
        if (!p) throw std::bad_alloc();
        try {
            p->prompt = dup(cp.prompt);
            p->grammar_lazy = cp.grammar_lazy;
            /* A grammar the library made (tools, a schema) starts where the template's generation
             * prompt ends; a user's GBNF starts at the answer (as llama-server's
             * common_grammar_needs_prefill). */
            bool made = !cp.grammar.empty() && !(in->grammar && *in->grammar);
            if (made && !cp.grammar_lazy && strip_generation_prompt(cp.grammar, cp.generation_prompt))
                made = false;
            p->grammar_prefill = made && !cp.grammar_lazy;
            p->grammar = dup_or_null(cp.grammar);
            p->trigger_patterns = dup_list(patterns, &p->n_trigger_patterns);
            p->trigger_tokens = dup_tokens(trig_tokens, &p->n_trigger_tokens);
            p->preserved_tokens = dup_tokens(preserved, &p->n_preserved_tokens);
            p->stops = dup_list(cp.additional_stops, &p->n_stops);
            p->generation_prompt = dup(cp.generation_prompt);
            p->thinking_start = dup(cp.thinking_start_tag);
            p->thinking_end = dup_list(cp.thinking_end_tags, &p->n_thinking_end);
            p->format = dup(common_chat_format_name(cp.format));
        } catch (...) {
            chat_plan_free(p);
            throw;
        }
        p->parser = parser_guard.release();
        *out = p;
        return SIPP_OK;
    });
}

void chat_plan_free(chat_plan *p) {
    if (!p) return;
    free(p->prompt);
    free(p->grammar);
    free_list(p->trigger_patterns, p->n_trigger_patterns);
    free(p->trigger_tokens);
    free(p->preserved_tokens);
    free_list(p->stops, p->n_stops);
    free(p->generation_prompt);
    free(p->thinking_start);
    free_list(p->thinking_end, p->n_thinking_end);
    free(p->format);
    delete static_cast<answer_format *>(p->parser);
    free(p);
}

sipp_status chat_parser_new(const chat_plan *p, chat_parser **out, char *err) {
    *out = nullptr;
    return guarded(err, "chat parser", [&] {
        auto *ps = new chat_parser();
        const auto *fmt = static_cast<const answer_format *>(p->parser);
        ps->params = fmt->params;
        ps->short_ids = fmt->short_ids;
        *out = ps;
        return SIPP_OK;
    });
}

void chat_parser_free(chat_parser *ps) {
    if (!ps) return;
    free_message(ps->view);
    delete ps;
}

static void fill_view(chat_parser *ps) {
    free_message(ps->view);
    chat_message &v = ps->view;
    v.content = dup(ps->msg.content);
    v.reasoning = dup(ps->msg.reasoning_content);
    if (ps->msg.tool_calls.empty()) return;
    v.tool_calls = static_cast<chat_tool_call *>(calloc(ps->msg.tool_calls.size(), sizeof *v.tool_calls));
    if (!v.tool_calls) throw std::bad_alloc();
    for (const auto &tc : ps->msg.tool_calls) {
        chat_tool_call &c = v.tool_calls[v.n_tool_calls++];
        c.id = dup(tc.id);
        c.name = dup(tc.name);
        c.arguments = dup(tc.arguments);
    }
}

/* The typed deltas of diffs (calloc'ed, *n of them); throws std::bad_alloc, after freeing what it made. */
static chat_delta *deltas_of(const std::vector<common_chat_msg_diff> &diffs, size_t *n) {
    chat_delta *d = static_cast<chat_delta *>(calloc(diffs.size(), sizeof *d));
    if (!d) throw std::bad_alloc();
    *n = 0;
    try {
        for (const auto &df : diffs) {
            chat_delta &o = d[(*n)++];
            o.tool_index = -1;
            o.content = dup_or_null(df.content_delta);
            o.reasoning = dup_or_null(df.reasoning_content_delta);
            if (df.tool_call_index != std::string::npos) {
                o.tool_index = (long)df.tool_call_index;
                o.tool_id = dup_or_null(df.tool_call_delta.id);
                o.tool_name = dup_or_null(df.tool_call_delta.name);
                o.tool_arguments = dup_or_null(df.tool_call_delta.arguments);
            }
        }
    } catch (...) {
        chat_deltas_free(d, *n);
        throw;
    }
    return d;
}

sipp_status chat_parser_feed(chat_parser *ps, const char *text, size_t len, bool is_final,
                             chat_delta **deltas, size_t *n_deltas, char *err) {
    *deltas = nullptr;
    *n_deltas = 0;
    return guarded(err, "parsing the model's answer", [&] {
        ps->text.append(text ? text : "", len);
        common_chat_msg parsed;
        try {
            parsed = common_chat_parse(ps->text, !is_final, ps->params);
        } catch (const std::exception &) {
            if (!is_final) return SIPP_OK; /* an incomplete answer: wait for more */
            throw;
        }
        if (parsed.empty() && !is_final) return SIPP_OK;
        bool short_ids = ps->short_ids;
        parsed.set_tool_call_ids(ps->ids, [short_ids] { return random_call_id(short_ids); });
        auto diffs = common_chat_msg_diff::compute_diffs(ps->msg, parsed);
        ps->msg = std::move(parsed);
        fill_view(ps);
        if (diffs.empty()) return SIPP_OK;
        size_t n = 0;
        *deltas = deltas_of(diffs, &n);
        *n_deltas = n;
        return SIPP_OK;
    });
}

const chat_message *chat_parser_message(const chat_parser *ps) { return &ps->view; }

void chat_deltas_free(chat_delta *d, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(d[i].content);
        free(d[i].reasoning);
        free(d[i].tool_id);
        free(d[i].tool_name);
        free(d[i].tool_arguments);
    }
    free(d);
}

sipp_status chat_schema_to_grammar(const char *schema_json, char **grammar, char *err) {
    *grammar = nullptr;
    return guarded(err, "json_schema", [&] {
        *grammar = dup(json_schema_to_grammar(common_json::parse(schema_json), false));
        return SIPP_OK;
    });
}

struct llama_sampler *chat_budget_sampler_new(const struct llama_vocab *vocab, const char *start_tag,
                                              const char *const *end_tags, size_t n_end, int budget,
                                              bool in_thinking, char *err) {
    struct llama_sampler *out = nullptr;
    guarded(err, "thinking_budget_tokens", [&] {
        if (!start_tag || !*start_tag || n_end == 0)
            throw bad_input(
                "this model's chat format has no reasoning tags, so a thinking budget cannot apply");
        std::vector<llama_tokens> start = {common_tokenize(vocab, start_tag, false, true)};
        std::vector<llama_tokens> end;
        for (size_t i = 0; i < n_end; i++)
            end.push_back(common_tokenize(vocab, end_tags[i], false, true));
        out = common_reasoning_budget_init(vocab, start, end, end[0], budget,
                                           in_thinking ? REASONING_BUDGET_COUNTING : REASONING_BUDGET_IDLE);
        if (!out) throw std::runtime_error("the reasoning-budget sampler could not be made");
        return SIPP_OK;
    });
    return out;
}

bool chat_sampler_accept(struct llama_sampler *smpl, int32_t token, char *err) {
    return guarded(err, "grammar", [&] {
               llama_sampler_accept(smpl, token);
               return SIPP_OK;
           }) == SIPP_OK;
}

} /* extern "C" */
