"""Ports for the tests and benchmarks.

A program that can report its own port should get --port 0 and be read back ("listening on ...":
tests/support/gateway.py), which no other process can race. free_port is for the rest: a server that
cannot (llama-server, nginx, ggml's rpc-server), or an address that must have nothing listening."""

import socket

LOOPBACK = "127.0.0.1"


def free_port(host=LOOPBACK):
    """A TCP port on host that was free a moment ago: bound, then closed. Another process may take it
    before the caller binds it again; nothing listens on it meanwhile."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# A port with nothing listening, for "the upstream is down" tests: the same thing under the name that
# says why it is wanted.
closed_port = free_port
