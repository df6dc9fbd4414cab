"""A model split across hosts with ggml's RPC backend (`--backend rpc`, `sipp rpc-server`).

Three network namespaces stand in for three hosts: the client's and one per rpc-server, each server
joined to the client by a veth pair. Namespaces keep the addresses private to this test run, so
parallel runs cannot collide; their names carry the pid and are always deleted at the end. Without
the rights to create namespaces (not root), the same tests run on loopback with the servers on
127.0.0.2 and 127.0.0.3 (on ports the kernel just gave out), and say so. SIPP_TEST_RPC_LOOPBACK=1
forces that variant, and RpcSplitLoopbackTest runs it where namespaces can be made, so the fallback
is tested too.

What is checked: a split model gives the same greedy tokens as --backend cpu and embeddings within
tolerance; killing a server mid-stream gives one clean line naming it (exit 75) and the next run
after it restarts works; an unreachable server, a fake server answering an old protocol version and
a peer that is not an rpc-server each give an error naming the endpoint; sipp doctor --rpc reports
the remote device.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest

from tests.integration.common import SIPP, make_model
from tests.support.ports import free_port

PORT_A, PORT_B = 50052, 50053
START_TIMEOUT = 30   # seconds for an rpc-server to listen
RUN_TIMEOUT = 300
KILL_AFTER_BYTES = 64  # streamed text before a server is killed mid-generation
LOST_EXIT = 75
EMBED_TOLERANCE = 1e-3


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


class Hosts:
    """Where the client and the two servers run: namespaces when possible (and not told otherwise by
    loopback or SIPP_TEST_RPC_LOOPBACK=1), else loopback."""

    def __init__(self, loopback=False):
        tag = f"{os.getpid() % 100000}"
        self.names = [f"sipprpc{tag}c", f"sipprpc{tag}a", f"sipprpc{tag}b"]
        loopback = loopback or os.environ.get("SIPP_TEST_RPC_LOOPBACK") == "1"
        self.namespaces = (not loopback and shutil.which("ip") is not None and os.geteuid() == 0 and
                           self._create(tag))
        if self.namespaces:
            self.addr_a, self.addr_b = "10.77.1.2", "10.77.2.2"
            self.port_a, self.port_b = PORT_A, PORT_B  # the namespaces are this run's alone
        else:
            self.addr_a, self.addr_b = "127.0.0.2", "127.0.0.3"
            self.port_a, self.port_b = free_port(self.addr_a), free_port(self.addr_b)
            print("test_rpc: cannot create network namespaces (needs root and iproute2); "
                  "running the loopback variant (servers on 127.0.0.2 and 127.0.0.3)")

    def _create(self, tag):
        client, ns_a, ns_b = self.names
        created = []
        try:
            for ns in self.names:
                if _ip("netns", "add", ns).returncode != 0:
                    raise OSError(f"ip netns add {ns}")
                created.append(ns)
            for ns, net, side in ((ns_a, 1, "a"), (ns_b, 2, "b")):
                here, there = f"sr{tag}{side}0", f"sr{tag}{side}1"
                steps = [
                    ["link", "add", here, "type", "veth", "peer", "name", there],
                    ["link", "set", here, "netns", client],
                    ["link", "set", there, "netns", ns],
                    ["-n", client, "addr", "add", f"10.77.{net}.1/24", "dev", here],
                    ["-n", ns, "addr", "add", f"10.77.{net}.2/24", "dev", there],
                    ["-n", client, "link", "set", here, "up"],
                    ["-n", ns, "link", "set", there, "up"],
                    ["-n", ns, "link", "set", "lo", "up"],
                ]
                for step in steps:
                    if _ip(*step).returncode != 0:
                        raise OSError("ip " + " ".join(step))
            _ip("-n", client, "link", "set", "lo", "up")
            return True
        except OSError:
            for ns in created:
                _ip("netns", "delete", ns)
            return False

    def unused_port(self, addr):
        """A port nothing listens on at addr (in a namespace, nothing listens past the servers')."""
        return PORT_B + 100 if self.namespaces else free_port(addr)

    def prefix(self, which):
        """The command prefix that runs a program on host which ('client', 'a' or 'b')."""
        if not self.namespaces:
            return []
        ns = {"client": self.names[0], "a": self.names[1], "b": self.names[2]}[which]
        return ["ip", "netns", "exec", ns]

    def delete(self):
        if self.namespaces:
            for ns in self.names:  # deleting a namespace deletes its end of each veth, and so the pair
                _ip("netns", "delete", ns)


class RpcServer:
    def __init__(self, hosts, which, addr, port):
        self.hosts, self.which, self.addr, self.port = hosts, which, addr, port
        self.endpoint = f"{addr}:{port}"
        self.proc = None
        self.log = tempfile.TemporaryFile(mode="w+")

    def start(self):
        cmd = self.hosts.prefix(self.which) + [SIPP, "rpc-server", "--host", self.addr, "--port", str(self.port),
                                               "--threads", "1"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            self.log.seek(0)
            if "transport" in self.log.read():
                return self
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise AssertionError(f"rpc-server {self.endpoint} exited {self.proc.returncode}: {self.log.read()}")
            time.sleep(0.05)
        raise AssertionError(f"rpc-server {self.endpoint} did not start in {START_TIMEOUT} s")

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def output(self):
        self.log.seek(0)
        return self.log.read()


class RpcSplitTest(unittest.TestCase):
    loopback = False

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # Big enough that a long generation is still streaming when a server is killed.
        cls.model = make_model(cls.tmp.name, n_embd=256, n_layer=6, n_head=8, n_head_kv=4, n_ff=512)
        cls.hosts = Hosts(cls.loopback)
        cls.a = RpcServer(cls.hosts, "a", cls.hosts.addr_a, cls.hosts.port_a)
        cls.b = RpcServer(cls.hosts, "b", cls.hosts.addr_b, cls.hosts.port_b)
        try:
            cls.a.start()
            cls.b.start()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for s in (cls.a, cls.b):
            s.stop()
        cls.hosts.delete()
        cls.tmp.cleanup()

    def servers(self):
        return f"{self.a.endpoint},{self.b.endpoint}"

    def client(self, args, env=None, timeout=RUN_TIMEOUT):
        full_env = dict(os.environ, **(env or {}))
        cmd = self.hosts.prefix("client") + [SIPP, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)

    def generate(self, *extra, env=None):
        return self.client([self.model, "Once upon a time", "--temperature", "0", "--max-tokens", "24",
                            "--threads", "1", "--seed", "1", *extra], env=env)

    def test_split_is_greedy_identical_to_cpu(self):
        cpu = self.generate("--backend", "cpu")
        self.assertEqual(cpu.returncode, 0, cpu.stderr)
        split = self.generate("--backend", "rpc", "--rpc", self.servers(), "--stats", "json")
        self.assertEqual(split.returncode, 0, split.stderr)
        self.assertTrue(cpu.stdout)
        self.assertEqual(split.stdout, cpu.stdout)
        stats = json.loads(split.stderr.strip().splitlines()[-1])
        self.assertEqual(stats["backend"], "rpc")
        hosts = {p["host"]: p for p in stats["placement"]}
        # Every host holds layers: the local CPU and both servers, by free memory.
        self.assertEqual(set(hosts), {"local", self.a.endpoint, self.b.endpoint})
        # a device may hold its layers' weights in more than one layout (on a CPU with AMX, a second
        # "AMX" row for the same layers): each host's layer range counts once
        ranges = {(p["host"], p["first_layer"], p["n_layers"]) for p in stats["placement"]}
        self.assertEqual(sum(n for _, _, n in ranges), 6, stats["placement"])
        for p in stats["placement"]:
            self.assertGreater(p["n_layers"], 0, p)
        self.assertTrue(hosts[self.b.endpoint]["output"])
        self.assertGreater(hosts[self.a.endpoint]["buffer_bytes"], 0)

    def test_tensor_split_places_layers_as_told(self):
        r = self.generate("--backend", "rpc", "--rpc", self.servers(), "--tensor-split", "0,1,2", "--stats", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        stats = json.loads(r.stderr.strip().splitlines()[-1])
        layers = {p["host"]: p["n_layers"] for p in stats["placement"]}
        self.assertEqual(layers.get(self.a.endpoint), 2)
        self.assertEqual(layers.get(self.b.endpoint), 4)
        self.assertEqual(layers.get("local", 0), 0)
        self.assertEqual(r.stdout, self.generate("--backend", "cpu").stdout)

    def test_servers_from_the_environment(self):
        r = self.generate("--backend", "rpc", "--stats", "json", env={"SIPP_RPC_SERVERS": self.a.endpoint})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(self.a.endpoint, r.stderr)

    def test_bad_arguments_name_the_input(self):
        cases = [
            (["--backend", "rpc", "--rpc", self.a.endpoint.split(":")[0]], "is not HOST:PORT"),
            (["--backend", "rpc", "--rpc", self.servers(), "--tensor-split", "1,1"], "needs 3"),
            (["--backend", "rpc", "--rpc", self.servers(), "--tensor-split", "1,x,1"], "is not a number in 0.."),
            (["--backend", "cpu", "--rpc", self.servers()], "only used with backend 'rpc'"),
            (["--backend", "rpc"], "needs at least one server"),
            (["--backend", "rpc", "--rpc", f"{self.a.endpoint},{self.a.endpoint}"], "given twice"),
        ]
        for args, want in cases:
            with self.subTest(args=args):
                r = self.generate(*args)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(want, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_unreachable_server_is_named(self):
        dead = f"{self.hosts.addr_a}:{self.hosts.unused_port(self.hosts.addr_a)}"
        r = self.generate("--backend", "rpc", "--rpc", f"{self.a.endpoint},{dead}")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"rpc server {dead} is unreachable", r.stderr)
        self.assertNotIn("GGML_ASSERT", r.stderr)

    def test_doctor_reports_the_remote_device(self):
        r = self.client(["doctor", "--rpc", self.a.endpoint, "--json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        rpc = doc["rpc"][0]
        self.assertEqual(rpc["endpoint"], self.a.endpoint)
        self.assertTrue(rpc["ok"])
        self.assertEqual(rpc["protocol"], "6.0.0")
        self.assertGreater(rpc["memory_free"], 0)
        dead = self.client(["doctor", "--rpc", f"{self.hosts.addr_b}:{self.hosts.unused_port(self.hosts.addr_b)}"])
        self.assertEqual(dead.returncode, 1)
        self.assertIn("unreachable", dead.stdout + dead.stderr)

    def test_verify_compares_the_split_with_a_local_run(self):
        r = self.client(["verify", self.model, "--backends", "cpu,rpc", "--rpc", self.servers(), "--threads", "1",
                         "--json", "--no-bench"])
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        doc = json.loads(r.stdout)
        self.assertTrue(doc["verdict"]["passed"], doc["verdict"])

    def test_ops_shows_layers_per_host(self):
        r = self.client(["ops", self.model, "--backend", "rpc", "--rpc", self.servers(), "--threads", "1", "--json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        hosts = {p["host"]: p["n_layers"] for p in doc["placement"]}
        self.assertEqual(sum(hosts.values()), 6)
        self.assertGreater(hosts[self.a.endpoint], 0)
        ran_on = ",".join(op["where"] for op in doc["ops"])
        self.assertIn("RPC", ran_on)

    def test_embeddings_match_cpu_within_tolerance(self):
        script = (
            "import json, sys, sipp\n"
            "out = {}\n"
            "with sipp.Client() as c:\n"
            "    for b in ('cpu', 'rpc'):\n"
            "        c.add(b, sipp.local(sys.argv[1], backend=b, threads=1, parallel=1, ctx_size=256))\n"
            "        e = c.embed(['a split model', 'the same numbers'], endpoint=b)\n"
            "        out[b] = [list(v) for v in e]\n"
            "print(json.dumps(out))\n")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, SIPP_RPC_SERVERS=self.servers(),
                   PYTHONPATH=os.path.join(root, "bindings", "python"))
        cmd = self.hosts.prefix("client") + ["python3", "-c", script, self.model]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        cpu, rpc = out["cpu"], out["rpc"]
        self.assertEqual(len(cpu), len(rpc))
        for u, v in zip(cpu, rpc):
            self.assertEqual(len(u), len(v))
            self.assertLess(max(abs(x - y) for x, y in zip(u, v)), EMBED_TOLERANCE)

    def test_server_killed_mid_stream_then_restarted(self):
        cmd = self.hosts.prefix("client") + [SIPP, self.model, "Once", "--backend", "rpc", "--rpc", self.servers(),
                                             "--temperature", "0", "--max-tokens", "20000", "--ignore-eos",
                                             "--ctx-size", "20480", "--threads", "1"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        got = b""
        try:
            while len(got) < KILL_AFTER_BYTES:
                chunk = proc.stdout.read1(4096)
                if not chunk:
                    break
                got += chunk
            self.assertGreaterEqual(len(got), KILL_AFTER_BYTES, "the generation did not stream")
            self.b.stop(signal.SIGKILL)
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            self.b.start()
        err = err.decode(errors="replace")
        self.assertEqual(proc.returncode, LOST_EXIT, err)
        self.assertIn(f"rpc server {self.b.endpoint} went away", err)
        self.assertNotIn(self.a.endpoint + " went away", err)
        self.assertNotIn("GGML_ASSERT", err)
        # The restarted server serves the next run.
        r = self.generate("--backend", "rpc", "--rpc", self.servers())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.generate("--backend", "cpu").stdout)

    def test_rpc_server_refuses_what_it_cannot_do(self):
        r = self.client(["rpc-server", "--mem", "1024"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--mem is not supported", r.stderr)
        busy = self.hosts.prefix("a") + [SIPP, "rpc-server", "--host", self.a.addr, "--port", str(self.a.port)]
        r = subprocess.run(busy, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"port {self.a.port} on {self.a.addr} is in use", r.stderr)


class RpcSplitLoopbackTest(RpcSplitTest):
    """The same tests in the variant that runs without namespaces: servers on 127.0.0.2 and
    127.0.0.3, the client on this host."""
    loopback = True

    def test_it_is_the_loopback_variant(self):
        self.assertFalse(self.hosts.namespaces)
        self.assertTrue(self.a.endpoint.startswith("127.0.0.2:"), self.a.endpoint)


class FakeServer:
    """A TCP peer on loopback that answers the RPC HELLO with the bytes given."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(10)
        self.endpoint = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            while True:
                conn, _ = self.sock.accept()
                with conn:
                    conn.settimeout(10)
                    conn.recv(64)
                    conn.sendall(self.answer)
        except OSError:
            return

    def close(self):
        self.sock.close()
        self.thread.join(timeout=10)


class RpcProtocolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = make_model(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_against(self, answer):
        fake = FakeServer(answer)
        try:
            r = subprocess.run([SIPP, self.model, "hi", "--backend", "rpc", "--rpc", fake.endpoint, "--max-tokens", "1",
                                "--threads", "1"], capture_output=True, text=True, timeout=RUN_TIMEOUT)
        finally:
            fake.close()
        return fake.endpoint, r

    def test_old_protocol_version_is_a_clear_error(self):
        # Protocol 3's HELLO answer: size 4, then major 3, minor 0, patch 0, padding.
        endpoint, r = self.run_against(struct.pack("<Q", 4) + bytes([3, 0, 0, 0]))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"rpc server {endpoint} speaks RPC protocol 3.0.0", r.stderr)
        self.assertIn("same llama.cpp release", r.stderr)
        self.assertNotIn("GGML", r.stderr)

    def test_a_peer_that_is_not_an_rpc_server(self):
        endpoint, r = self.run_against(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"rpc server {endpoint}", r.stderr)
        self.assertIn("not ggml's RPC protocol", r.stderr)


if __name__ == "__main__":
    unittest.main()
