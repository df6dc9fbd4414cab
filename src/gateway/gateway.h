/*
 * gateway.h: the gateway as `sipp serve` (its only user) sees it: the configuration and gw_serve.
 *
 * The gateway puts engines (local targets) and OpenAI-compatible servers (remote targets) behind one
 * HTTP endpoint. It is a thin client of sipp.h: nothing here knows about llama.cpp. Its layers, each
 * with a header of its own, from the bottom up (a file includes only headers of layers below it,
 * and tests/integration/test_repo.py fails on an include cycle):
 *
 *   config.h          the TOML configuration: [server], [security.rate_limit], [[tokens]], [[targets]]
 *   errors.h          the OpenAI error shape and the table of error kinds
 *   media_parts.h     images and audio: the chat content parts every route translates its API's into
 *   request_parse.h   request bodies (one JSON tree) into generation requests, with 400s naming the field
 *   sse.h             server-sent events framing
 *   metrics.h         counters and histograms, rendered as Prometheus text
 *   server.h          the state a running gateway shares: the target table and module handles
 *   connection.h      HTTP on libmicrohttpd: calls, replies, streams, read timeouts, connection caps
 *   residency.h       local models loaded on demand, evicted by measured memory, kept alive
 *   model_watch.h     the targets' model files watched (inotify): a change takes a target out of service
 *   sigbus_guard.h    a model file cut short under a running request: one line naming it, exit 75
 *   targets.h         target runtime: the table, remote upstreams, readiness
 *   upstream.h        remote targets: proxying with libcurl, replica ejection and health probes
 *   auth.h            bearer tokens and per-token target scopes
 *   rate_limit.h      per-client rate limit (token bucket)
 *   admission.h       target lookup as the caller sees it, readiness, concurrency and queue
 *   generate.h        running a generation on a local engine: waiting, streaming, cancelling
 *   embed.h           embeddings on a local target
 *   responses_store.h the bounded in-memory store behind the Responses API's previous_response_id
 *   rename.h          field names of chat completions renamed into another API's (engine errors)
 *   translate.h       what the other APIs' routes share: a request rebuilt as a chat-completions
 *                     body, run through the one request parser, errors in the API's own names
 *   routes.h          the route handlers: routes_openai.c, routes_native.c, routes_ops.c, web.c, and
 *                     routes_responses.c (OpenAI Responses), routes_anthropic.c (Anthropic
 *                     Messages), routes_ollama.c (Ollama's API)
 *   guard.h           Host, Origin, CORS, content type, token and rate checks before a route
 *   router.h          the route table and method checks
 *   reload.h          SIGHUP: the configuration read again and applied to the running targets
 *   gateway.h         listener.c: the listen socket, signals, graceful shutdown
 *
 * Threads. libmicrohttpd runs every connection on a thread of its own, so a handler may block while
 * it waits for an engine or an upstream, and a stream never holds up another connection.
 */
#ifndef SIPP_GATEWAY_H
#define SIPP_GATEWAY_H

#include "gateway/config.h"
#include "gateway/reload.h"

/* Runs the gateway until SIGTERM or SIGINT (both drain: see listener.c); SIGHUP reads the
 * configuration again with reload (NULL: there is no file; it says so). Returns the process exit
 * status. */
int gw_serve(gw_config *cfg, const gw_reloader *reload);

#endif
