/*
 * progress.c: what sipp-train shows on the terminal while it works.
 *
 * One progress line on stderr, redrawn in place with a carriage return, and only when stderr is a
 * terminal: a log file or a test's pipe gets the per-epoch lines on stdout and the messages, never
 * a stream of carriage returns. A message clears the line first, so the two never interleave; the
 * next redraw puts the line back below it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "train.h"
#include "util/util.h"

#define REDRAW_INTERVAL_S 0.25 /* at most four redraws a second */
#define BAR_WIDTH 24
#define MS_PER_S 1e3
#define CLEAR_LINE "\r\033[K"

static bool line_shown;
static double last_redraw = -1.0;

static bool on_terminal(void) {
    static int tty = -1;
    if (tty < 0) tty = isatty(STDERR_FILENO) ? 1 : 0;
    return tty == 1;
}

void progress_clear(void) {
    if (!line_shown) return;
    fputs(CLEAR_LINE, stderr);
    fflush(stderr);
    line_shown = false;
    last_redraw = -1.0;
}

void train_report(const char *fmt, ...) {
    progress_clear();
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void progress_show(const char *label, double frac, double tokens_per_s, double eta_s, double loss) {
    if (!on_terminal()) return;
    const double now = sipp_now_ms() / MS_PER_S;
    if (last_redraw >= 0 && now - last_redraw < REDRAW_INTERVAL_S) return;
    last_redraw = now;

    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    char bar[BAR_WIDTH + 1];
    const int filled = (int)(frac * BAR_WIDTH);
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '-';
    bar[BAR_WIDTH] = '\0';
    char eta[32] = "?";
    if (eta_s >= 0) sipp_format_duration(eta_s, eta, sizeof eta);
    fprintf(stderr, CLEAR_LINE "%s [%s] %3.0f%%  %.0f tokens/s  loss %.3f  ETA %s", label, bar, frac * 100.0,
            tokens_per_s, loss, eta);
    fflush(stderr);
    line_shown = true;
}
