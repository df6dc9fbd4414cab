/*
 * backends.c: `sipp backends [--json]`: every backend name with whether it is compiled into the
 * active artifact, whether it is available (a device is visible), and its devices.
 * Then the recipe matrix (sipp_recipes_list): each recipe x backend installed, installable or
 * unsupported here, and the recipe's auto choice.
 * `sipp backends --target cli|node|python|web` lists instead what that package can select: the
 * artifacts it sees, and the artifact each backend name would load (packages.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"
#include "util/recipes_json.h"

#define MAX_BACKENDS 16
#define MAX_RECIPES 8
#define MAX_DEVICES 32
#define MIB (1024.0 * 1024.0)

json_t *cli_devices_json(const char *backend) {
    sipp_device_info devs[MAX_DEVICES];
    int n = sipp_devices_list(devs, MAX_DEVICES);
    json_t *arr = json_array();
    for (int i = 0; i < n && i < MAX_DEVICES; i++) {
        if (backend && strcmp(devs[i].backend, backend) != 0) continue;
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:I}", "backend",
                                             devs[i].backend, "name", devs[i].name, "description",
                                             devs[i].description, "type", devs[i].kind, "software",
                                             devs[i].software, "memory_free", (json_int_t)devs[i].memory_free,
                                             "memory_total", (json_int_t)devs[i].memory_total));
    }
    return arr;
}

json_t *cli_backends_json(void) {
    sipp_backend_info b[MAX_BACKENDS];
    int n = sipp_backends_list(b, MAX_BACKENDS);
    json_t *arr = json_array();
    for (int i = 0; i < n && i < MAX_BACKENDS; i++)
        json_array_append_new(arr,
                              json_pack("{s:s, s:b, s:b, s:o}", "name", b[i].name, "compiled", b[i].compiled,
                                        "available", b[i].available, "devices", cli_devices_json(b[i].name)));
    return arr;
}

json_t *cli_recipes_json(void) {
    sipp_recipe_info r[MAX_RECIPES];
    int n = sipp_recipes_list(r, MAX_RECIPES);
    return sipp_recipes_json(r, n < MAX_RECIPES ? n : MAX_RECIPES);
}

/* The recipe matrix: a row per recipe, a column per backend (its state, "+avail" when a device is
 * visible), then auto's choice; the notes of what is not installed below it. */
static void print_recipes(json_t *recipes) {
    size_t i, k;
    json_t *r, *b;
    printf("\n%-11s", "recipe");
    json_array_foreach(json_object_get(json_array_get(recipes, 0), "backends"), k, b)
        printf(" %-17s", json_string_value(json_object_get(b, "name")));
    printf(" auto\n");
    json_array_foreach(recipes, i, r) {
        printf("%-11s", json_string_value(json_object_get(r, "name")));
        json_array_foreach(json_object_get(r, "backends"), k, b) {
            char cell[32];
            snprintf(cell, sizeof cell, "%s%s", json_string_value(json_object_get(b, "state")),
                     json_is_true(json_object_get(b, "available")) ? "+avail" : "");
            printf(" %-17s", cell);
        }
        printf(" %s\n", json_string_value(json_object_get(json_object_get(r, "auto"), "backend")));
    }
    json_array_foreach(recipes, i, r) {
        json_t *a = json_object_get(r, "auto");
        printf("  %s: auto %s\n", json_string_value(json_object_get(r, "name")),
               json_string_value(json_object_get(a, "reason")));
        json_array_foreach(json_object_get(r, "backends"), k, b) {
            const char *note = json_string_value(json_object_get(b, "note"));
            if (note && strcmp(json_string_value(json_object_get(b, "state")), "installable") == 0)
                printf("    %s: installable with %s\n", json_string_value(json_object_get(b, "name")), note);
        }
    }
}

static int print_target(const char *name, bool as_json) {
    cli_target t;
    if (!cli_target_parse(name, &t)) {
        cli_error("backends: --target '%s' is not one of %s", name, cli_target_names());
        return EXIT_USAGE;
    }
    json_t *j = cli_target_json(t);
    if (as_json) {
        char *s = json_dumps(j, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(j);
        return EXIT_OK;
    }
    const char *env = json_string_value(json_object_get(j, "backend_env"));
    printf("target %s%s%s%s\n", name, env ? " (selects with " : "", env ? env : "", env ? ")" : "");
    if (t == TARGET_WEB)
        printf("the browser runtime chooses cpu or webgpu per endpoint; it loads no native artifact\n");
    size_t i;
    json_t *v;
    const char *key;
    json_array_foreach(json_object_get(j, "artifacts"), i, v) {
        printf("  artifact %s (", json_string_value(json_object_get(v, "dir")));
        size_t k;
        json_t *b;
        json_array_foreach(json_object_get(v, "backends"), k, b)
            printf("%s%s", k ? "+" : "", json_string_value(b));
        printf(")%s%s\n", json_is_true(json_object_get(v, "default")) ? ", default" : "",
               json_is_true(json_object_get(v, "record")) ? ", built for this target" : "");
    }
    json_object_foreach(json_object_get(j, "select"), key, v)
        printf("  %-7s -> %s (%s)\n", key, json_string_value(json_object_get(v, "artifact")),
               json_string_value(json_object_get(v, "source")));
    json_decref(j);
    return EXIT_OK;
}

static const cli_option *const options[] = {&cli_opt_json, &cli_opt_artifact, &cli_opt_target, NULL};

static const char about[] =
    "Lists every backend: compiled (its module is in the artifact), available (a device is\n"
    "visible) and its devices. Software devices such as lavapipe are marked.\n"
    "Then the recipes (llamacpp, whispercpp, tts, flite) x backends: installed, installable (with\n"
    "the command that builds it) or unsupported on this host, and each recipe's auto choice.\n"
    "--target lists what that package can select: the artifacts it sees (the one sipp build\n"
    "TARGET made is marked) and the artifact each backend name would load.\n";

static const cli_command command = {.name = "backends",
                                    .synopsis = "backends [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 0,
                                    .args_hint = "backends takes options only"};

int cmd_backends(int argc, char **argv) {
    cli_common o = {0};
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, NULL, &n_args);
    if (rc != CLI_PARSED) return rc;
    bool as_json = o.json;
    const char *artifact = o.artifact, *target = o.target;
    if (target) return print_target(target, as_json);
    if (!cli_runtime_init(artifact)) return EXIT_RUNTIME;
    json_t *list = cli_backends_json();
    if (as_json) {
        json_t *root = json_pack("{s:s, s:O, s:o}", "artifact", sipp_runtime_artifact_dir(), "backends", list,
                                 "recipes", cli_recipes_json());
        char *s = json_dumps(root, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(root);
        json_decref(list);
        return EXIT_OK;
    }
    printf("artifact %s\n\n%-8s %-9s %-10s %s\n", sipp_runtime_artifact_dir(), "backend", "compiled",
           "available", "devices");
    size_t i;
    json_t *b;
    json_array_foreach(list, i, b) {
        json_t *devs = json_object_get(b, "devices");
        printf("%-8s %-9s %-10s", json_string_value(json_object_get(b, "name")),
               json_is_true(json_object_get(b, "compiled")) ? "yes" : "no",
               json_is_true(json_object_get(b, "available")) ? "yes" : "no");
        size_t k;
        json_t *d;
        json_array_foreach(devs, k, d) {
            printf("%s%s (%s%s, %.0f/%.0f MiB free)", k ? "; " : "",
                   json_string_value(json_object_get(d, "name")),
                   json_string_value(json_object_get(d, "description")),
                   json_is_true(json_object_get(d, "software")) ? ", software" : "",
                   (double)json_integer_value(json_object_get(d, "memory_free")) / MIB,
                   (double)json_integer_value(json_object_get(d, "memory_total")) / MIB);
        }
        printf("%s\n", json_array_size(devs) ? "" : "-");
    }
    json_decref(list);
    json_t *recipes = cli_recipes_json();
    print_recipes(recipes);
    json_decref(recipes);
    return EXIT_OK;
}
