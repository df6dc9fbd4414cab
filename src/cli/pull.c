/*
 * pull.c: `sipp pull SOURCE`: download a model into the local store (src/store/pull.c does the work).
 *
 * Output follows the rest of the CLI: on a terminal, stderr carries a progress line redrawn a few
 * times a second (bytes, percent, speed, ETA); when stderr is not a terminal nothing is printed while
 * the download runs, so logs hold only the result. The result is one line on stdout (the model's
 * name and path); errors are one line on stderr. Ctrl-C stops the download and keeps the partial
 * file, so the same command resumes it.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "util/util.h"

#define REDRAW_MS 100
#define BAR_WIDTH 24
#define SIZE_TEXT 32

typedef struct {
    cli_common c; /* pull takes none of the shared options */
    const char *name, *sha256;
    int retries;
    bool force;
} pull_options;

static const cli_option opt_name = {
    .name = "--name",
    .arg = "NAME",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(pull_options, name),
    .help = "store the model as NAME (default: the catalog's, or the file's name)"};
static const cli_option opt_sha256 = {.name = "--sha256",
                                      .arg = "HEX[,HEX...]",
                                      .kind = CLI_OPT_STRING,
                                      .offset = offsetof(pull_options, sha256),
                                      .help = "the expected SHA-256, one per file (default: the catalog's)"};
static const cli_option opt_force = {.name = "--force",
                                     .kind = CLI_OPT_FLAG,
                                     .offset = offsetof(pull_options, force),
                                     .help = "download again even if the store has the model from this URL"};
static const cli_option opt_retries = {.name = "--retries",
                                       .arg = "N",
                                       .kind = CLI_OPT_INT,
                                       .offset = offsetof(pull_options, retries),
                                       .lo = 0,
                                       .hi = 100,
                                       .help = "reconnect up to N times after a broken transfer (default 3)"};

static const cli_option *const options[] = {&opt_name, &opt_sha256, &opt_force, &opt_retries, NULL};

static const char about[] =
    "Downloads a GGUF model into the local store, where `sipp NAME ...` and gateway targets find it.\n"
    "\n"
    "SOURCE is one of:\n"
    "  https://host/path/model.gguf         any http(s) URL of a .gguf file\n"
    "  hf://ORG/REPO/FILE.gguf              a file in a Hugging Face repository "
    "(hf://ORG/REPO@REV/FILE.gguf\n"
    "                                       pins a revision)\n"
    "  NAME                                 a model of the catalog (sipp models list --all)\n"
    "A split model (FILE-00001-of-00003.gguf) is pulled as a whole set. A --sha256 mismatch deletes the\n"
    "download and exits 1. An interrupted pull keeps its partial file; running the same command again\n"
    "resumes it. A catalog model with a multimodal projector (\"mmproj\") gets it too, checked against\n"
    "\"mmproj_sha256\", as mmproj-NAME.gguf beside the model (--mmproj auto takes it); a projector that\n"
    "fails fails the pull.\n"
    "\n"
    "environment: SIPP_MODELS_DIR (the store; default ${XDG_DATA_HOME:-~/.local/share}/sipp/models),\n"
    "SIPP_CATALOG (the catalog file), SIPP_HF_ENDPOINT (instead of https://huggingface.co), HF_TOKEN\n"
    "(gated Hugging Face models), http_proxy/https_proxy/no_proxy, CURL_CA_BUNDLE/SSL_CERT_FILE\n"
    "\n"
    "exit status: 0 success, 1 runtime failure, 2 bad usage\n";

static const cli_command command = {.name = "pull",
                                    .synopsis = "pull SOURCE [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 1,
                                    .args_hint = "pull one SOURCE at a time"};

static atomic_int interrupted;

static void on_sigint(int sig) { atomic_store(&interrupted, 1); }

typedef struct bar {
    double last_ms;
    bool drawn;
} bar;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void draw(const sipp_pull_progress *p) {
    char done[SIZE_TEXT], total[SIZE_TEXT], speed[SIZE_TEXT], eta[SIZE_TEXT] = "--:--";
    sipp_format_size(p->done, done, sizeof done);
    sipp_format_size((uint64_t)p->bytes_per_s, speed, sizeof speed);
    if (p->eta_s >= 0) sipp_format_duration(p->eta_s, eta, sizeof eta);
    fprintf(stderr, "\r");
    if (p->n_files > 1) fprintf(stderr, "[%d/%d] ", p->file_index, p->n_files);
    fprintf(stderr, "%s ", p->file);
    if (p->total) {
        sipp_format_size(p->total, total, sizeof total);
        double frac = (double)p->done / (double)p->total;
        if (frac > 1) frac = 1;
        int filled = (int)(frac * BAR_WIDTH + 0.5);
        fputc('[', stderr);
        for (int i = 0; i < BAR_WIDTH; i++)
            fputc(i < filled ? '#' : ' ', stderr);
        fprintf(stderr, "] %3d%% %s / %s", (int)(frac * 100), done, total);
    } else {
        fprintf(stderr, "%s", done);
    }
    fprintf(stderr, "  %s/s", speed);
    if (!p->file_done) fprintf(stderr, "  ETA %s", eta);
    fprintf(stderr, "\033[K");
    if (p->file_done) fputc('\n', stderr);
    fflush(stderr);
}

static bool on_progress(const sipp_pull_progress *p, void *user) {
    bar *b = user;
    if (p->note) {
        fprintf(stderr, "\r\033[Ksipp: %s: %s\n", p->file, p->note);
        b->drawn = false;
    }
    double now = now_ms();
    if (p->file_done || !b->drawn || now - b->last_ms >= REDRAW_MS) {
        draw(p);
        b->last_ms = now;
        b->drawn = !p->file_done;
    }
    return atomic_load(&interrupted) == 0;
}

static bool on_progress_quiet(const sipp_pull_progress *p, void *user) {
    return atomic_load(&interrupted) == 0;
}

/* The projector pulled with the model (its catalog entry's "mmproj"), as the store lists it. */
static void print_projector(const sipp_pull_result *r) {
    sipp_store_model *models;
    size_t n;
    char err[SIPP_ERROR_SIZE], size[SIZE_TEXT];
    if (sipp_store_list(NULL, &models, &n, err) != SIPP_OK) return;
    for (size_t i = 0; i < n; i++) {
        const sipp_store_file *f = models[i].mmproj;
        if (strcmp(models[i].name, r->name) != 0 || !f) continue;
        sipp_format_size(f->size, size, sizeof size);
        printf("projector %s (%s, sha256 %s), beside it for --mmproj auto\n", f->file, size, f->sha256);
    }
    sipp_store_list_free(models, n);
}

int cmd_pull(int argc, char **argv) {
    sipp_pull_params pp = sipp_pull_default_params();
    pull_options o = {.retries = pp.retries};
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, &pp.source, &n_args);
    if (rc != CLI_PARSED) return rc;
    pp.name = o.name;
    pp.sha256 = o.sha256;
    pp.retries = o.retries;
    pp.force = o.force;
    if (!pp.source) {
        cli_error("no SOURCE given: sipp pull URL|hf://ORG/REPO/FILE.gguf|NAME (see sipp pull --help)");
        return EXIT_USAGE;
    }

    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    bar b = {0};
    pp.progress = isatty(STDERR_FILENO) ? on_progress : on_progress_quiet;
    pp.user = &b;
    sipp_pull_result r;
    char err[SIPP_ERROR_SIZE];
    sipp_status st = sipp_store_pull(&pp, &r, err);
    if (st != SIPP_OK) {
        if (b.drawn) fputs("\r\033[K", stderr);
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    char size[SIZE_TEXT];
    sipp_format_size(r.size, size, sizeof size);
    if (r.already) {
        printf("%s is already in the store (%s%s): %s\n", r.name, size, r.verified ? ", sha256 verified" : "",
               r.path);
        print_projector(&r);
        return EXIT_OK;
    }
    char files[SIZE_TEXT] = "";
    if (r.n_files > 1) snprintf(files, sizeof files, ", %d files", r.n_files);
    printf("pulled %s (%s%s, sha256 %s%s) in %.1f s%s%s: %s\n", r.name, size, files, r.sha256,
           r.verified ? " verified" : ", not verified: no known hash", r.seconds,
           r.resumed ? ", resumed" : "", r.replaced ? ", replacing the model of that name" : "", r.path);
    print_projector(&r);
    return EXIT_OK;
}
