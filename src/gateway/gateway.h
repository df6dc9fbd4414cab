/*
 * gateway.h: the gateway as `sipp serve` (its only user) sees it: the configuration and gw_serve.
 *
 * The gateway puts engines (local targets) and OpenAI-compatible servers (remote targets) behind one
 * HTTP endpoint. It is a thin client of sipp.h: nothing here knows about llama.cpp. Its rooms, from
 * the bottom up (a file includes only headers of its own room or of lower ones, and each folder is
 * included through its one header; tests/lint/test_gateway_layers.py checks both, and
 * docs/architecture.md draws them):
 *
 *   base (src/gateway/)  config, errors, field names, metrics, request decoding (request_parse.h),
 *                        media parts, the renderers' typed answer (format.h), the MCP client,
 *                        the models directory, and the shared state (server.h)
 *   http/http.h          libmicrohttpd: the listen socket, calls, replies, streams, multipart, Range,
 *                        SSE, bearer tokens, the guard, per-client rate limits
 *   kinds/kinds.h        what a target is (gw_kind: llama, remote, supervised, whisper, tts) and the
 *                        work each does: generate, embed, tokens, infill, upstream, relay, supervise
 *   fleet/fleet.h        the targets at run time: residency, admission, dispatch, file watching,
 *                        SIGHUP's reload, serve --check
 *   api/api.h            one file per API (openai.c, anthropic.c, ollama.c, responses.c, ...), the
 *                        field tables, the translations into a chat, the route table (router.c)
 *   gateway.h            gateway.c: gw_serve, signals, graceful shutdown
 *
 * Threads. libmicrohttpd runs every connection on a thread of its own, so a handler may block while
 * it waits for an engine or an upstream, and a stream never holds up another connection.
 */
#ifndef SIPP_GATEWAY_H
#define SIPP_GATEWAY_H

#include "gateway/config.h"
#include "gateway/fleet/fleet.h"

/* Runs the gateway until SIGTERM or SIGINT (both drain: see gateway.c); SIGHUP reads the
 * configuration again with reload (NULL: there is no file; it says so). Returns the process exit
 * status. */
int gw_serve(gw_config *cfg, const gw_reloader *reload);

#endif
