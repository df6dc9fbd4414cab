/*
 * health.c: `sipp health [--url URL] [--path PATH] [--timeout S]`: exits 0 when a gateway answers
 * GET URL/ready with 200, 1 otherwise (with the reason on stderr).
 *
 * A container's HEALTHCHECK runs it, so that the image needs no curl or wget: the runtime image holds
 * sipp and its libraries only. /ready (every target loaded, not draining) is the default; --path
 * /health asks only whether the process answers.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/options.h"

#define HEALTH_DEFAULT_URL "http://127.0.0.1:8080"
#define HEALTH_DEFAULT_PATH "/ready"
#define HEALTH_DEFAULT_TIMEOUT_S 5
#define HEALTH_MAX_TIMEOUT_S 300
#define HEALTH_URL_MAX 2048
#define HTTP_OK 200

typedef struct {
    cli_common c;
    const char *url, *path;
    int timeout_s;
} health_opts;

static const cli_option opt_url = {.name = "--url",
                                   .arg = "URL",
                                   .kind = CLI_OPT_STRING,
                                   .offset = offsetof(health_opts, url),
                                   .help = "the gateway (default " HEALTH_DEFAULT_URL ")"};
static const cli_option opt_path = {.name = "--path",
                                    .arg = "PATH",
                                    .kind = CLI_OPT_STRING,
                                    .offset = offsetof(health_opts, path),
                                    .help = "the route asked (default " HEALTH_DEFAULT_PATH
                                            "; /health: the process answers)"};
static const cli_option opt_timeout = {.name = "--timeout",
                                       .arg = "S",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(health_opts, timeout_s),
                                       .lo = 1,
                                       .hi = HEALTH_MAX_TIMEOUT_S,
                                       .help = "seconds to wait for the answer (default 5)"};
static const cli_option *const options[] = {&opt_url, &opt_path, &opt_timeout, NULL};

static const cli_command command = {
    .name = "health",
    .synopsis = "health [--url URL] [--path PATH] [--timeout S]",
    .about = "Exits 0 when the gateway at URL answers GET PATH (/ready: every target loaded) with 200,\n"
             "1 otherwise, saying why on stderr: a container's health check that needs no curl.\n",
    .options = options,
    .max_args = 0,
    .args_hint = "health takes options only"};

/* The body is not needed: the status says it all. */
static size_t discard(char *p, size_t size, size_t n, void *arg) {
    (void)p;
    (void)arg;
    return size * n;
}

int cmd_health(int argc, char **argv) {
    health_opts o = {
        .url = HEALTH_DEFAULT_URL, .path = HEALTH_DEFAULT_PATH, .timeout_s = HEALTH_DEFAULT_TIMEOUT_S};
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, NULL, &n_args);
    if (rc != CLI_PARSED) return rc;
    char url[HEALTH_URL_MAX];
    size_t n = strlen(o.url);
    while (n && o.url[n - 1] == '/')
        n--;
    if (snprintf(url, sizeof url, "%.*s%s%s", (int)n, o.url, *o.path == '/' ? "" : "/", o.path) >=
        (int)sizeof url) {
        cli_error("health: the URL %s%s is longer than %d bytes", o.url, o.path, HEALTH_URL_MAX);
        return EXIT_USAGE;
    }
    CURL *h = curl_easy_init();
    if (!h) {
        cli_error("health: cannot start libcurl");
        return EXIT_RUNTIME;
    }
    char err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)o.timeout_s);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK) {
        cli_error("health: GET %s failed: %s; is `sipp serve` running there?", url,
                  *err ? err : curl_easy_strerror(cc));
        return EXIT_RUNTIME;
    }
    if (status != HTTP_OK) {
        cli_error("health: GET %s answered %ld (not ready: GET it for each target's state)", url, status);
        return EXIT_RUNTIME;
    }
    printf("ok: GET %s answered 200\n", url);
    return EXIT_OK;
}
