/*
 * artifact.c: `sipp artifact verify DIR [--key PUB.pem]` and `sipp artifact sign DIR --key KEY.pem`:
 * the Ed25519 signature of an artifact (libsipp's sipp_artifact_verify / sipp_artifact_sign; the
 * format is described in src/backend/signature.c). verify exits 1 naming the first file that
 * differs from what was signed; it is the same check SIPP_REQUIRE_SIGNED=PUB makes at run time.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: sipp artifact verify DIR [--key PUB.pem]\n"
    "       sipp artifact sign DIR --key KEY.pem\n\n"
    "verify checks DIR/signature.json against DIR/manifest.json and DIR/sbom.spdx.json, then every\n"
    "file against the SBOM's SHA-256, and names the first file that differs (exit 1). With --key it\n"
    "also checks that PUB.pem made the signature; without, it checks integrity against the key the\n"
    "signature names. sign writes DIR/signature.json with an Ed25519 private key (sipp build\n"
    "--sign KEY.pem does this for the artifact it makes). A process started with\n"
    "SIPP_REQUIRE_SIGNED=PUB.pem refuses an artifact that does not verify with that key.\n"
    "Keys: openssl genpkey -algorithm ed25519 -out KEY.pem && openssl pkey -in KEY.pem -pubout -out "
    "PUB.pem\n";

int cmd_artifact(int argc, char **argv) {
    if (argc == 0 || cli_wants_help(argc, argv)) {
        fputs(usage, argc == 0 ? stderr : stdout);
        return argc == 0 ? EXIT_USAGE : EXIT_OK;
    }
    const char *action = argv[0], *dir = NULL, *key = NULL;
    bool verify = strcmp(action, "verify") == 0;
    if (!verify && strcmp(action, "sign") != 0) {
        cli_error("artifact: '%s' is not one of verify, sign (sipp artifact --help)", action);
        return EXIT_USAGE;
    }
    cli_args a = {.argc = argc, .argv = argv, .i = 1};
    while (a.i < argc && !a.bad) {
        if (cli_flag_value(&a, "--key"))
            key = a.value;
        else if (argv[a.i][0] != '-' && !dir)
            dir = argv[a.i++];
        else {
            cli_error("artifact %s: unexpected argument '%s' (sipp artifact --help)", action, argv[a.i]);
            return EXIT_USAGE;
        }
    }
    if (a.bad) return EXIT_USAGE;
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
