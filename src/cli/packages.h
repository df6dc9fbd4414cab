/*
 * packages.h: the packages an artifact is built for (`sipp build TARGET`), and which artifact each of
 * them would load. Shared by `sipp build`, `sipp backends --target` and `sipp doctor --target`.
 */
#ifndef SIPP_CLI_PACKAGES_H
#define SIPP_CLI_PACKAGES_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum { TARGET_CLI, TARGET_NODE, TARGET_PYTHON, TARGET_WEB, TARGET_COUNT } cli_target;

/* "cli", "node", "python", "web". */
const char *cli_target_name(cli_target t);
/* False (and nothing printed) when s names no target; "all" is not a target. */
bool cli_target_parse(const char *s, cli_target *out);
/* "cli, node, python, web". */
const char *cli_target_names(void);

/* The source tree the running binary was built in (ROOT/build/bin/sipp); false when it is not in one. */
bool cli_source_root(char *root, size_t n);

/* Where the target's build record lives: ROOT/build/targets/TARGET.json. The Node and Python
 * packages read the same file (bindings/node/lib/artifact.js, bindings/python/sipp/_native.py). */
bool cli_target_record_path(cli_target t, char *out, size_t n);
/* Records that `sipp build TARGET` made the artifact in dir; prints the error. */
bool cli_target_record_write(cli_target t, const char *dir);

/* The backends an artifact's manifest.json lists, or NULL when it has no readable manifest. */
json_t *cli_artifact_backends(const char *dir);

/* Which artifact a target would load in this process for a requested backend ("auto" or a name). */
typedef struct cli_target_choice {
    bool found;         /* an artifact was chosen (it may still lack the backend: see has_backend) */
    bool has_backend;   /* the chosen artifact compiles in the requested backend (always, for auto) */
    char dir[PATH_MAX]; /* the artifact directory */
    char source[160];   /* why this one: "SIPP_ARTIFACT", "sipp build node", "the default artifact" */
    char problem[512];  /* when !found or !has_backend: what is missing, in words */
} cli_target_choice;

/* The same rules as the package itself: for cli, --artifact (explicit, may be NULL), then
 * SIPP_ARTIFACT, then the artifact the binary was linked against; for node and python,
 * SIPP_ARTIFACT, then the record of `sipp build TARGET`, then the default artifact, then the first
 * artifact under build/artifacts that has the backend. web has no native artifact. */
void cli_target_choose(cli_target t, const char *backend, const char *explicit_dir, cli_target_choice *out);

/* What a target can select: {"target", "record", "artifacts": [{"dir", "backends", "record"}],
 * "select": {"auto": dir, "vulkan": dir, ...}}. */
json_t *cli_target_json(cli_target t);

/* cli_runtime_init for a command that asks for `backend`: with no --artifact and no SIPP_ARTIFACT,
 * an explicit backend the default artifact lacks is taken from the artifact `sipp build cli`
 * recorded, when that one has it. */
bool cli_runtime_init_for(const char *artifact, const char *backend);

/* The environment variable that names the backend the package wants (NULL for cli and web). */
const char *cli_target_backend_env(cli_target t);

#endif
