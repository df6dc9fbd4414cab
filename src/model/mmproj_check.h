/*
 * mmproj_check.h: a projector file checked from GGUF headers alone (mmproj_check.c, internal), before
 * libmtmd reads it and for `sipp serve --check`, which must not load anything.
 */
#ifndef SIPP_MODEL_MMPROJ_CHECK_H
#define SIPP_MODEL_MMPROJ_CHECK_H

#include "sipp.h"

/* The file is a whole projector GGUF (general.architecture "clip", not truncated: mtmd does not
 * check short reads) whose output width can be read: mtmd dereferences a missing output tensor of a
 * type it knows (a crash, not an error). *n_embd (optional) gets that width. */
sipp_status sipp_mmproj_check_file(const char *path, int64_t *n_embd, char *errbuf);
/* The error for a projector of width proj beside a model of width text. */
sipp_status sipp_mmproj_width_error(char *errbuf, const char *path, int64_t proj, const char *text_path,
                                    int64_t text);

#endif
