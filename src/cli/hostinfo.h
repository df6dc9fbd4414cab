/*
 * hostinfo.h: facts about this host and the active artifact, as JSON, shared by `sipp doctor` (which
 * reports them) and `sipp verify --manifest` (which records them so that a manifest says where its
 * figures came from).
 */
#ifndef SIPP_CLI_HOSTINFO_H
#define SIPP_CLI_HOSTINFO_H

#include <jansson.h>

/* {"model", "cores", "features": [ISA flags that matter to ggml's CPU modules], "ggml_cpu_module"} */
json_t *cli_host_cpu_json(void);

/* {"name" (os-release PRETTY_NAME), "kernel", "machine"} */
json_t *cli_host_os_json(void);

/* {"dir", "manifest": <artifact>/manifest.json or null} */
json_t *cli_artifact_json(void);

#endif
