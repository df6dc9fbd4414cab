/*
 * pull.h: downloading a model into the store (`sipp pull`).
 */
#ifndef SIPP_MODEL_PULL_H
#define SIPP_MODEL_PULL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/sha256.h"
#include "store/source.h"
#include "sipp.h"

#define SIPP_PULL_DEFAULT_RETRIES 3

/* Where a download stands; passed to the progress callback several times a second. */
typedef struct sipp_pull_progress {
    int file_index; /* 1-based, of n_files */
    int n_files;
    const char *file;   /* the file's name in the store */
    uint64_t done;      /* bytes of this file on disk */
    uint64_t total;     /* bytes of this file; 0 while unknown */
    uint64_t received;  /* bytes received over the network in this pull, all files */
    double bytes_per_s; /* average over this pull */
    double eta_s;       /* seconds left for this file; -1 while unknown */
    bool file_done;     /* the file is complete (the last call for it) */
    const char *note;   /* a one-off remark ("the server ignored the range request; starting over");
                           NULL mostly */
} sipp_pull_progress;

/* Return false to stop the pull (it fails with SIPP_ERR_CANCELLED; the partial file is kept). */
typedef bool (*sipp_pull_progress_fn)(const sipp_pull_progress *p, void *user);

typedef struct sipp_pull_params {
    const char *source; /* http(s) URL, hf://ORG/REPO/FILE.gguf, or a catalog name */
    const char *name;   /* store name; NULL: the catalog's name, else one made from the URL */
    const char *sha256; /* expected digest(s), comma-separated, one per file of a split set;
                           NULL: the catalog's, when it knows them */
    bool force;         /* download even when the store already has this model from this URL */
    int retries;        /* reconnects after a transfer breaks off (default SIPP_PULL_DEFAULT_RETRIES) */
    sipp_pull_progress_fn progress;
    void *user;
} sipp_pull_params;

sipp_pull_params sipp_pull_default_params(void);

typedef struct sipp_pull_result {
    char name[SIPP_NAME_MAX + 1];
    char path[PATH_MAX];    /* the file to load (shard 1 of a split set) */
    char url[SIPP_URL_MAX]; /* where it came from (shard 1) */
    int n_files;
    uint64_t size;                /* bytes of all files */
    uint64_t received;            /* bytes received in this pull */
    bool verified;                /* every file matched a known sha256 */
    bool already;                 /* the store had it: nothing was downloaded */
    bool resumed;                 /* some file continued an earlier partial download */
    bool replaced;                /* the store had another model under this name; it is gone */
    char sha256[SIPP_SHA256_HEX]; /* of the first file */
    double seconds;
} sipp_pull_result;

/* Downloads a model into the store. Each file is fetched into partial/FILE.part (resuming what an
 * earlier pull left there when the server supports ranges), hashed as it arrives, checked (sha256
 * when known, GGUF magic and header), and only then renamed into the store. On any failure the
 * store itself is unchanged; a .part may remain in partial/ for the next pull to resume. */
sipp_status sipp_store_pull(const sipp_pull_params *params, sipp_pull_result *result, char *errbuf);

#endif
