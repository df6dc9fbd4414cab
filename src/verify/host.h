/*
 * host.h: facts about this host and the active artifact (host.c).
 */
#ifndef SIPP_VERIFY_HOST_H
#define SIPP_VERIFY_HOST_H

#include <jansson.h>

/* {"model", "cores", "features": [ISA flags that matter to ggml's CPU modules], "ggml_cpu_module"} */
json_t *verify_host_cpu_json(void);
/* {"name" (os-release PRETTY_NAME), "kernel", "machine"} */
json_t *verify_host_os_json(void);
/* {"dir", "manifest": <artifact>/manifest.json or null} */
json_t *verify_artifact_json(void);

#endif
