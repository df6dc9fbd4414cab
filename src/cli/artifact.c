/*
 * artifact.c: `sipp artifact verify DIR [--key PUB.pem]` and `sipp artifact sign DIR --key KEY.pem`:
 * the Ed25519 signature of an artifact (libsipp's sipp_artifact_verify / sipp_artifact_sign; the
 * format is described in src/backend/signature.c). verify exits 1 naming the first file that
 * differs from what was signed; it is the same check SIPP_REQUIRE_SIGNED=PUB makes at run time.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"

typedef struct {
    cli_common c; /* artifact takes none of the shared options */
    const char *key;
} artifact_options;

static const char about[] =
    "verify checks DIR/signature.json against DIR/manifest.json and DIR/sbom.spdx.json, then every\n"
    "file against the SBOM's SHA-256, and names the first file that differs (exit 1). With --key it\n"
    "also checks that PUB.pem made the signature; without, it checks integrity against the key the\n"
    "signature names. sign writes DIR/signature.json with an Ed25519 private key (sipp build\n"
    "--sign KEY.pem does this for the artifact it makes). A process started with\n"
    "SIPP_REQUIRE_SIGNED=PUB.pem refuses an artifact that does not verify with that key.\n"
    "Keys: openssl genpkey -algorithm ed25519 -out KEY.pem && openssl pkey -in KEY.pem -pubout -out "
    "PUB.pem\n";

static const cli_option opt_public_key = {.name = "--key",
                                          .arg = "PUB.pem",
                                          .kind = CLI_OPT_STRING,
                                          .offset = offsetof(artifact_options, key),
                                          .help =
                                              "also check that this Ed25519 public key made the signature"};
static const cli_option opt_private_key = {.name = "--key",
                                           .arg = "KEY.pem",
                                           .kind = CLI_OPT_STRING,
                                           .offset = offsetof(artifact_options, key),
                                           .help = "the Ed25519 private key that signs (required)"};
static const cli_option *const verify_options[] = {&opt_public_key, NULL};
static const cli_option *const sign_options[] = {&opt_private_key, NULL};

static const cli_command commands[] = {
    {.name = "artifact verify",
     .synopsis = "artifact verify DIR [--key PUB.pem]",
     .about = about,
     .options = verify_options,
     .max_args = 1,
     .args_hint = "one DIR only"},
    {.name = "artifact sign",
     .synopsis = "artifact sign DIR --key KEY.pem",
     .about = about,
     .options = sign_options,
     .max_args = 1,
     .args_hint = "one DIR only"},
};

int cmd_artifact(int argc, char **argv) {
    if (argc == 0 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        FILE *out = argc == 0 ? stderr : stdout;
        fprintf(out, "usage: sipp %s\n       sipp %s\n\n%s", commands[0].synopsis, commands[1].synopsis,
                about);
        return argc == 0 ? EXIT_USAGE : EXIT_OK;
    }
    const char *action = argv[0], *dir = NULL;
    bool verify = strcmp(action, "verify") == 0;
    if (!verify && strcmp(action, "sign") != 0) {
        cli_error("artifact: '%s' is not one of verify, sign (sipp artifact --help)", action);
        return EXIT_USAGE;
    }
    artifact_options o = {0};
    int n_args;
    int rc = cli_parse(&commands[verify ? 0 : 1], argc - 1, argv + 1, &o, &dir, &n_args);
    if (rc != CLI_PARSED) return rc;
    const char *key = o.key;
    if (!dir) {
        cli_error("artifact %s: name the artifact directory (sipp artifact %s DIR%s)", action, action,
                  verify ? " [--key PUB.pem]" : " --key KEY.pem");
        return EXIT_USAGE;
    }
    if (!verify && !key) {
        cli_error("artifact sign: --key KEY.pem (an Ed25519 private key) is required");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE];
    if ((verify ? sipp_artifact_verify(dir, key, err) : sipp_artifact_sign(dir, key, err)) != SIPP_OK) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    if (verify)
        printf("artifact %s verifies%s%s%s: signature, manifest, SBOM and every file\n", dir,
               key ? " with " : "", key ? key : "",
               key ? "" : " (integrity only: pass --key PUB.pem to check who signed it)");
    else
        printf("artifact %s signed: %s/signature.json\n", dir, dir);
    return EXIT_OK;
}
