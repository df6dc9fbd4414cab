/*
 * train.h: what the files of sipp-train (tools/train) share: the program's name, its exit codes and
 * how it reports to the person at the terminal.
 */
#ifndef SIPP_TRAIN_H
#define SIPP_TRAIN_H

#include <stdbool.h>

#define PROG "sipp-train"

enum {
    EXIT_RUNTIME = 1,      /* bad input (a missing file, an empty corpus), a failed load or write */
    EXIT_USAGE = 2,        /* an unknown flag or a value out of range */
    EXIT_INTERRUPTED = 130 /* Ctrl-C: a checkpoint was written first */
};

/* "sipp-train: MESSAGE" on stderr, on a line of its own (a progress line is cleared first). */
void train_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The progress line on stderr, redrawn in place; only when stderr is a terminal, at most a few
 * times a second. frac is the part of the run done (0..1), eta_s the seconds left (< 0: unknown). */
void progress_show(const char *label, double frac, double tokens_per_s, double eta_s, double loss);
void progress_clear(void);

#endif
