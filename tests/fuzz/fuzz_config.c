/*
 * fuzz_config.c: libFuzzer harness for the gateway's configuration parser (src/gateway/config.c),
 * which reads a TOML file an operator wrote, or one that was truncated or mangled on its way.
 *
 * Each input is parsed as a config file. The parser must never crash, leak or read out of bounds;
 * every problem it reports is one "FILE:LINE: problem" or "FILE: problem" line; a refused file has
 * at least one; an accepted one has at least one target, each with a name and a known type, limits
 * within their documented ranges, and every string a NUL-terminated C string.
 *
 * Build and run (after `make`; seeds in tests/fuzz/corpus/config, TOML tokens in tests/fuzz/toml.dict):
 *
 *   make build/fuzz/fuzz_config
 *   mkdir -p /tmp/config-corpus
 *   build/fuzz/fuzz_config -max_total_time=60 -dict=tests/fuzz/toml.dict /tmp/config-corpus
 * tests/fuzz/corpus/config
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/config.h"

#define FUZZ_FILE "fuzz.toml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void touch(const char *s) {
    if (s) (void)strlen(s); /* ASan reports a string without its NUL */
}

static void check_errors(const sipp_buf *errs) {
    check(errs->len > 0, "a refused config has a message");
    const char *line = errs->data;
    while (line && *line) {
        check(strncmp(line, FUZZ_FILE ":", strlen(FUZZ_FILE ":")) == 0, "every problem names the file");
        const char *nl = strchr(line, '\n');
        check(nl != NULL, "every problem ends its line");
        line = nl + 1;
    }
}

static void check_accepted(const gw_config *c) {
    check(c->n_targets > 0, "an accepted config has a target");
    check(c->port >= 0 && c->port <= GW_MAX_PORT, "port in range");
    check(c->max_request_bytes > 0 && c->max_buffered_bytes >= c->max_request_bytes, "body limits");
    check(c->max_concurrent_requests > 0 && c->max_queue >= 0, "admission limits");
    check(c->read_timeout_seconds > 0 && c->max_connections > 0 && c->max_connections_per_client > 0,
          "connection limits");
    check(c->media_fetch_timeout_ms > 0, "[media] fetch_timeout_ms is positive");
    touch(c->host);
    for (size_t i = 0; i < c->n_allowed_origins; i++)
        touch(c->allowed_origins[i]);
    for (size_t i = 0; i < c->n_allowed_hosts; i++)
        touch(c->allowed_hosts[i]);
    for (size_t i = 0; i < c->n_tokens; i++) {
        touch(c->tokens[i].env);
        touch(c->tokens[i].caller);
        for (size_t k = 0; k < c->tokens[i].n_targets; k++)
            touch(c->tokens[i].targets[k]);
        check(c->tokens[i].secret == NULL, "parsing reads no environment");
    }
    for (size_t i = 0; i < c->n_targets; i++) {
        const gw_target_config *t = &c->targets[i];
        check(t->name != NULL && t->name[0] != '\0', "a target has a name");
        check(t->type == GW_TARGET_LOCAL || t->type == GW_TARGET_REMOTE, "a target has a type");
        if (t->type == GW_TARGET_LOCAL) {
            check(t->model_path != NULL, "a local target has a model");
            touch(t->model_path);
            touch(t->backend);
        } else {
            check(t->n_base_urls > 0, "a remote target has a base_url");
            for (size_t k = 0; k < t->n_base_urls; k++)
                touch(t->base_urls[k]);
            touch(t->remote_model);
            touch(t->api_key_env);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gw_config c;
    gw_config_init(&c);
    sipp_buf errs = {0};
    if (gw_config_parse((const char *)data, size, FUZZ_FILE, &c, &errs)) {
        check(errs.len == 0, "an accepted config reports no problem");
        check_accepted(&c);
    } else {
        check_errors(&errs);
    }
    sipp_buf_free(&errs);
    gw_config_free(&c);
    return 0;
}
