/*
 * net_address.h: whether an address is on the public internet, for the connections sipp makes on
 * someone else's behalf: a gateway caller's pull (src/store/pull.c, [store] allow_private_sources)
 * and a chat's image fetched by URL (src/gateway/kinds/media_fetch.c, [media] fetch_allow_private). Both
 * check the address a socket is about to connect to, after the name was resolved, so a name that
 * resolves to a public address once and a private one the next time (DNS rebinding) gains nothing.
 */
#ifndef SIPP_UTIL_NET_ADDRESS_H
#define SIPP_UTIL_NET_ADDRESS_H

#include <stdbool.h>
#include <stddef.h>

struct sockaddr;

/* True when a connection to sa reaches the public internet: false for loopback, "this network",
 * private (10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64/10), link-local (169.254/16,
 * fe80::/10), benchmarking, documentation, multicast and reserved addresses, and for IPv4 ones
 * mapped into IPv6 (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) by the same rules; false for another
 * family and for NULL. */
bool sipp_address_public(const struct sockaddr *sa);

/* sa's address as text ("127.0.0.1", "::1"; "(family N)" for another family) in out, cap bytes
 * (SIPP_ADDRESS_TEXT_SIZE is enough for any). */
#define SIPP_ADDRESS_TEXT_SIZE 56
void sipp_address_text(const struct sockaddr *sa, char *out, size_t cap);

#endif
