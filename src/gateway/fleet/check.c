/*
 * check.c: `sipp serve --check` beyond the file's keys, reading headers only.
 *
 * A configuration can be valid TOML with every key right and still fail at the first load, or
 * route differently than it says: a model its kind cannot load (files_whole: a GGUF llama.cpp
 * would abort on, a whisper file whose header is cut short), a projector that is a text
 * model or of another width (libmtmd refuses it only when it loads), an alias that no request can
 * ever reach. Each is found here without loading anything, so that a check before a deploy says
 * what the start would find out later.
 *
 * Aliases route in order (targets.c: a target's own name first, then the aliases, the first glob
 * that matches wins, in config order). So an alias that is another target's name never routes to
 * its own target, and a plain alias that an earlier alias of another target matches (target a
 * has "gpt-*", target b, listed later, has "gpt-5") is dead too. Globs that are only partly
 * shadowed still route something and pass.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

#define GLOB_CHARS "*?["

/* A model file that cannot be read is skipped: gw_config_validate has reported it. */
static bool readable(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

static bool check_files(const gw_target_config *t, const char *config, sipp_buf *errs) {
    char err[SIPP_ERROR_SIZE];
    const gw_kind *kind = gw_kind_of_config(t); /* its recipe, which validation took from the file */
    if (!kind->resident || !readable(t->model_path)) return true;
    if (kind->files_whole && !kind->files_whole(t, err)) {
        sipp_buf_appendf(errs, "%s: target '%s': %s\n", config, t->name, err);
        return false;
    }
    if (!readable(t->mmproj) || sipp_mmproj_check(t->mmproj, t->model_path, err) == SIPP_OK) return true;
    sipp_buf_appendf(errs, "%s: target '%s': mmproj: %s\n", config, t->name, err);
    return false;
}

/* The alias that catches name before target `self`'s own alias k does: another target's name, or
 * an earlier alias of another target; NULL when none. *owner gets that target. */
static const char *shadow(const gw_config *cfg, size_t self, size_t k, const gw_target_config **owner) {
    const char *alias = cfg->targets[self].aliases[k];
    for (size_t i = 0; i < cfg->n_targets; i++) {
        *owner = &cfg->targets[i];
        if (i != self && strcmp(cfg->targets[i].name, alias) == 0) return cfg->targets[i].name;
    }
    for (size_t i = 0; i < self; i++) {
        *owner = &cfg->targets[i];
        for (size_t m = 0; m < cfg->targets[i].n_aliases; m++)
            if (fnmatch(cfg->targets[i].aliases[m], alias, 0) == 0) return cfg->targets[i].aliases[m];
    }
    return NULL;
}

static bool check_aliases(const gw_config *cfg, size_t self, const char *config, sipp_buf *errs) {
    const gw_target_config *t = &cfg->targets[self], *owner = NULL;
    bool ok = true;
    for (size_t k = 0; k < t->n_aliases; k++) {
        const char *alias = t->aliases[k],
                   *by = strpbrk(alias, GLOB_CHARS) ? NULL : shadow(cfg, self, k, &owner);
        if (!by) continue;
        ok = false;
        if (strcmp(by, owner->name) == 0 && strcmp(by, alias) == 0)
            sipp_buf_appendf(errs,
                             "%s: target '%s': alias '%s' is the name of target '%s', which a request for it "
                             "reaches instead; remove the alias or rename one of them\n",
                             config, t->name, alias, owner->name);
        else
            sipp_buf_appendf(
                errs,
                "%s: target '%s': alias '%s' is never used: target '%s' has the alias '%s', listed "
                "earlier, which catches it; list target '%s' first or narrow '%s'\n",
                config, t->name, alias, owner->name, by, t->name, by);
    }
    return ok;
}

bool gw_config_check_deep(const gw_config *cfg, const char *config, bool aliases, sipp_buf *errs) {
    bool ok = true;
    for (size_t i = 0; i < cfg->n_targets; i++) {
        ok = check_files(&cfg->targets[i], config, errs) && ok;
        if (aliases) ok = check_aliases(cfg, i, config, errs) && ok;
    }
    return ok;
}
