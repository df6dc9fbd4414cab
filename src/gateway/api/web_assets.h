/*
 * web_assets.h: the web page's files, embedded in the binary at build time
 * (scripts/embed_assets.py writes build/gen/web_assets.c from web/).
 */
#ifndef SIPP_GATEWAY_WEB_ASSETS_H
#define SIPP_GATEWAY_WEB_ASSETS_H

#include <stddef.h>

typedef struct sipp_web_asset {
    const char *path; /* "/index.html" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
} sipp_web_asset;

extern const sipp_web_asset sipp_web_assets[];
extern const size_t sipp_web_n_assets;

#endif
