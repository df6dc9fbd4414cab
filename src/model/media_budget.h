/*
 * media_budget.h: taking and giving back decoded media bytes from a shared budget (internal; the
 * budget itself is public, sipp.h).
 */
#ifndef SIPP_MODEL_MEDIA_BUDGET_H
#define SIPP_MODEL_MEDIA_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

#include "sipp.h"

/* The budget's size in bytes (0 for NULL). */
size_t sipp_media_budget_cap(const sipp_media_budget *b);
/* Takes bytes when they fit, all or nothing; true also for a NULL budget. [any thread] */
bool sipp_media_budget_take(sipp_media_budget *b, size_t bytes);
/* Gives back bytes taken. [any thread] */
void sipp_media_budget_give(sipp_media_budget *b, size_t bytes);

#endif
