/*
 * test_net_address.c: which addresses count as the public internet (src/util/net_address.c), the
 * rule a gateway caller's pull ([store] allow_private_sources) and a chat's fetched image ([media]
 * fetch_allow_private) are held to: every special-purpose IPv4 range, its edges, the IPv6 ones, and
 * IPv4 addresses dressed as IPv6 (mapped, NAT64, the deprecated compatible form).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "util/net_address.h"

static bool public_address(const char *text) {
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, text, &v4.sin_addr) == 1) return sipp_address_public((struct sockaddr *)&v4);
    cr_assert_eq(inet_pton(AF_INET6, text, &v6.sin6_addr), 1, "%s is not an address", text);
    return sipp_address_public((struct sockaddr *)&v6);
}

Test(address, private_and_special_ones_are_refused) {
    static const char *const refused[] = {"127.0.0.1",
                                          "127.255.0.9",
                                          "0.0.0.0",
                                          "0.255.255.255",
                                          "10.1.2.3",
                                          "10.255.255.255",
                                          "172.16.0.1",
                                          "172.31.255.255",
                                          "192.168.1.1",
                                          "169.254.0.0",
                                          "169.254.169.254",
                                          "169.254.255.255",
                                          "100.64.0.0",
                                          "100.64.0.1",
                                          "100.127.255.255",
                                          "192.0.0.8",
                                          "192.0.2.1",
                                          "198.18.0.1",
                                          "198.19.255.255",
                                          "198.51.100.7",
                                          "203.0.113.5",
                                          "224.0.0.1",
                                          "239.255.255.250",
                                          "240.0.0.1",
                                          "255.255.255.255",
                                          "::",
                                          "::1",
                                          "::127.0.0.1",
                                          "fe80::1",
                                          "febf::1",
                                          "fc00::1",
                                          "fd12:3456::1",
                                          "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                                          "ff02::1",
                                          "2001:db8::1",
                                          "::ffff:127.0.0.1",
                                          "::ffff:0.0.0.0",
                                          "::ffff:10.0.0.1",
                                          "::ffff:100.64.0.1",
                                          "::ffff:169.254.169.254",
                                          "::ffff:192.168.0.1",
                                          "64:ff9b::a9fe:a9fe",
                                          "64:ff9b::7f00:1",
                                          "fec0::1"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        cr_expect_not(public_address(refused[i]), "%s was taken for a public address", refused[i]);
}

Test(address, public_ones_pass) {
    static const char *const public[] = {
        "8.8.8.8",         "1.1.1.1",         "172.15.255.255",   "172.32.0.1",
        "100.63.255.255",  "100.128.0.1",     "192.167.1.1",      "169.253.0.1",
        "11.0.0.1",        "126.255.255.255", "128.0.0.1",        "223.255.255.255",
        "2606:4700::1111", "::ffff:8.8.8.8",  "64:ff9b::808:808", "2a00:1450::1"};
    for (size_t i = 0; i < sizeof public / sizeof public[0]; i++)
        cr_expect(public_address(public[i]), "%s was refused", public[i]);
}

Test(address, other_families_are_refused) {
    struct sockaddr sa = {.sa_family = AF_UNIX};
    cr_assert_not(sipp_address_public(&sa));
    cr_assert_not(sipp_address_public(NULL));
}

Test(address, text_names_the_address) {
    char out[SIPP_ADDRESS_TEXT_SIZE];
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "169.254.169.254", &v4.sin_addr);
    sipp_address_text((struct sockaddr *)&v4, out, sizeof out);
    cr_assert_str_eq(out, "169.254.169.254");
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &v6.sin6_addr);
    sipp_address_text((struct sockaddr *)&v6, out, sizeof out);
    cr_assert_str_eq(out, "::ffff:127.0.0.1");
    inet_pton(AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", &v6.sin6_addr);
    sipp_address_text((struct sockaddr *)&v6, out, sizeof out); /* the longest there is */
    cr_assert_str_eq(out, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    sipp_address_text((struct sockaddr *)&un, out, sizeof out);
    cr_assert_str_eq(out, "(family 1)");
}
