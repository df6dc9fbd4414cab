/*
 * net_address.c: public and special-purpose addresses (see net_address.h).
 */
#include "util/net_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* IPv4 ranges that are not the public internet (IANA's special-purpose registry, RFC 6890). */
static const struct {
    uint32_t net;
    int bits;
} v4_special[] = {
    {0x00000000, 8},  /* 0/8 "this network" */
    {0x0A000000, 8},  /* 10/8 private */
    {0x64400000, 10}, /* 100.64/10 shared (carrier-grade NAT) */
    {0x7F000000, 8},  /* 127/8 loopback */
    {0xA9FE0000, 16}, /* 169.254/16 link-local (cloud metadata lives here) */
    {0xAC100000, 12}, /* 172.16/12 private */
    {0xC0000000, 24}, /* 192.0.0/24 protocol assignments */
    {0xC0000200, 24}, /* 192.0.2/24 documentation */
    {0xC0A80000, 16}, /* 192.168/16 private */
    {0xC6120000, 15}, /* 198.18/15 benchmarking */
    {0xC6336400, 24}, /* 198.51.100/24 documentation */
    {0xCB007100, 24}, /* 203.0.113/24 documentation */
    {0xE0000000, 4},  /* 224/4 multicast */
    {0xF0000000, 4},  /* 240/4 reserved, and the broadcast address */
};

static bool v4_public(uint32_t a) {
    for (size_t i = 0; i < sizeof v4_special / sizeof v4_special[0]; i++)
        if ((a >> (32 - v4_special[i].bits)) == (v4_special[i].net >> (32 - v4_special[i].bits)))
            return false;
    return true;
}

bool sipp_address_public(const struct sockaddr *sa) {
    if (!sa) return false;
    if (sa->sa_family == AF_INET) return v4_public(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
    if (sa->sa_family != AF_INET6) return false;
    const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, v4_mapped, sizeof v4_mapped) == 0)
        return v4_public((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
    bool zero_prefix = true; /* ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d */
    for (size_t i = 0; i < 12; i++)
        zero_prefix &= b[i] == 0;
    if (zero_prefix) return false;
    if ((b[0] & 0xfe) == 0xfc) return false;                 /* fc00::/7 unique local */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return false; /* fe80::/10 link-local */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return false; /* fec0::/10 site-local (deprecated) */
    if (b[0] == 0xff) return false;                          /* multicast */
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return false; /* 2001:db8::/32 */
    if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b)               /* 64:ff9b::/96 NAT64 */
        return v4_public((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
    return true;
}

void sipp_address_text(const struct sockaddr *sa, char *out, size_t cap) {
    const void *raw = NULL;
    if (sa && sa->sa_family == AF_INET6)
        raw = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    else if (sa && sa->sa_family == AF_INET)
        raw = &((const struct sockaddr_in *)sa)->sin_addr;
    if (!raw || !inet_ntop(sa->sa_family, raw, out, (socklen_t)cap))
        snprintf(out, cap, "(family %d)", sa ? sa->sa_family : -1);
}
