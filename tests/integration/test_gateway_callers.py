"""Who may see and change what: every route that reads or changes something one caller keeps (stored
responses) or that all callers share (the model store, the set of loaded models), called by each kind
of caller, with exactly the outcome docs/gateway.md's table ("Who may see and change what") gives.

Callers: A and B (tokens for every target), C (a token scoped to m1), ADMIN (admin = true), OPS1 (admin
scoped to m1), and a gateway without tokens (every call is the one admin caller). Routes: GET
/v1/responses/ID, its input_items, previous_response_id, DELETE /v1/responses/ID, POST /api/pull, DELETE
/api/delete, and the Ollama unload (keep_alive 0 with nothing to run). Also here: response ids are random
and never the client's x-request-id; a pull never replaces a served model file; pull sources are https
and public addresses unless [store] allow_private_sources; an upstream failure of a pull is a 502 naming
the source; a response over max_stored_bytes says store: false; metadata has OpenAI's bounds.

Pulls download from a loopback HTTP server (httpfixture); the refused addresses (127.0.0.1, ::1,
169.254.169.254) are refused before any packet is sent, so nothing leaves the machine.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpfixture  # noqa: E402
import test_gateway_support as gw  # noqa: E402

SECRETS = {"A": "callers-alice-secret-01", "B": "callers-bob-secret-0002", "C": "callers-carol-secret-03",
           "ADMIN": "callers-admin-secret-04", "OPS1": "callers-ops1-secret-005"}
ENVS = {name: f"SIPP_CALLERS_{name}" for name in SECRETS}
CTX = 1024
ID_RE = re.compile(r"^resp_[0-9a-f]{32}$")
MAX_STORED_BYTES = 6000  # a plain response fits; one carrying 16 long metadata values does not


def auth(who):
    return {"Authorization": f"Bearer {SECRETS[who]}"} if who else {}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ndjson(data):
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


class CallersBase(unittest.TestCase):
    """A gateway with targets m1 (its file in the model store) and m2, and the callers above."""

    tokens = True
    table = ""

    @classmethod
    def setUpClass(cls):
        cls.store = tempfile.mkdtemp(prefix="sipp-callers-store-", dir=gw.tmpdir())
        cls.m1_path = os.path.join(cls.store, "m1.gguf")
        shutil.copyfile(gw.model("tiny"), cls.m1_path)
        tokens = ""
        if cls.tokens:
            tokens = (f'[[tokens]]\nenv = "{ENVS["A"]}"\ncaller = "alice"\n\n'
                      f'[[tokens]]\nenv = "{ENVS["B"]}"\ncaller = "bob"\n\n'
                      f'[[tokens]]\nenv = "{ENVS["C"]}"\ncaller = "carol"\ntargets = ["m1"]\n\n'
                      f'[[tokens]]\nenv = "{ENVS["ADMIN"]}"\ncaller = "ops"\nadmin = true\n\n'
                      f'[[tokens]]\nenv = "{ENVS["OPS1"]}"\ncaller = "ops1"\nadmin = true\ntargets = ["m1"]\n\n')
        cfg = (cls.table + "\n" + tokens + gw.local_target("m1", cls.m1_path, parallel=1, ctx=CTX) +
               gw.local_target("m2", gw.model("tiny2", seed=2), parallel=1, ctx=CTX))
        env = {ENVS[n]: s for n, s in SECRETS.items()}
        env.update({"SIPP_MODELS_DIR": cls.store, "NO_PROXY": "*"})
        cls.http = httpfixture.HTTPFixture()
        with open(gw.model("tiny2", seed=2), "rb") as f:
            cls.other_gguf = f.read()
        cls.gw = gw.serve_config(cfg, env=env)

    @classmethod
    def tearDownClass(cls):
        cls.http.stop()
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def create(self, who, model="m1", headers=None, **kw):
        body = {"model": model, "input": f"from {who}", "max_output_tokens": 2, "temperature": 0, **kw}
        status, hdrs, r = self.gw.json("POST", "/v1/responses", body, {**auth(who), **(headers or {})})
        self.assertEqual(status, 200, r)
        self.assertRegex(r["id"], ID_RE)
        return r

    def outcomes(self, who, rid):
        """The statuses of each stored-response route for caller `who` on response rid, DELETE last."""
        get = self.gw.json("GET", f"/v1/responses/{rid}", headers=auth(who))
        items = self.gw.json("GET", f"/v1/responses/{rid}/input_items", headers=auth(who))
        cont = self.gw.json("POST", "/v1/responses", {"model": "m1", "input": "next", "max_output_tokens": 2,
                                                      "previous_response_id": rid, "store": False}, auth(who))
        delete = self.gw.json("DELETE", f"/v1/responses/{rid}", headers=auth(who))
        for status, _, body in (get, items, cont, delete):
            if status == 404:
                self.assertEqual(body["error"]["code"], "not_found", body)
                self.assertIn(rid, body["error"]["message"])  # the same 404 as an unknown id
        return get[0], items[0], cont[0], delete[0]

    def ollama(self, who, method, path, body):
        status, _, data = self.gw.request(method, path, body, auth(who))
        return status, json.loads(data) if data else None


class ResponsesOwnershipTest(CallersBase):
    """Each caller against a response made by another, on m1 and on m2."""

    def test_owner_reads_continues_and_deletes(self):
        rid = self.create("A")["id"]
        self.assertEqual(self.outcomes("A", rid), (200, 200, 200, 200))
        self.assertEqual(self.gw.json("GET", f"/v1/responses/{rid}", headers=auth("A"))[0], 404)

    def test_other_caller_sees_nothing(self):
        for made_on in ("m1", "m2"):
            with self.subTest(made_on=made_on):
                rid = self.create("A", made_on)["id"]
                self.assertEqual(self.outcomes("B", rid), (404, 404, 404, 404))
                self.assertEqual(self.gw.json("GET", f"/v1/responses/{rid}", headers=auth("A"))[0], 200)

    def test_scoped_caller_sees_only_its_own(self):
        for made_on in ("m1", "m2"):
            with self.subTest(made_on=made_on):
                rid = self.create("A", made_on)["id"]
                self.assertEqual(self.outcomes("C", rid), (404, 404, 404, 404))
                self.assertEqual(self.gw.json("GET", f"/v1/responses/{rid}", headers=auth("A"))[0], 200)
        own = self.create("C", "m1")["id"]
        self.assertEqual(self.outcomes("C", own), (200, 200, 200, 200))

    def test_admin_sees_every_callers_response(self):
        for made_on in ("m1", "m2"):
            with self.subTest(made_on=made_on):
                rid = self.create("A", made_on)["id"]
                self.assertEqual(self.outcomes("ADMIN", rid), (200, 200, 200, 200))

    def test_a_scoped_admin_sees_only_responses_of_its_targets(self):
        """Only while the caller may use the response's target: OPS1 may use m1, not m2."""
        on_m1, on_m2 = self.create("A", "m1")["id"], self.create("A", "m2")["id"]
        self.assertEqual(self.outcomes("OPS1", on_m2), (404, 404, 404, 404))
        self.assertEqual(self.outcomes("OPS1", on_m1), (200, 200, 200, 200))

    def test_ids_are_random_and_never_the_clients_request_id(self):
        mine = self.create("A", headers={"x-request-id": "alice-conv-1"}, input="alice's words")
        status, hdrs, theirs = self.gw.json("POST", "/v1/responses",
                                            {"model": "m1", "input": "injected by bob", "max_output_tokens": 2},
                                            {**auth("B"), "x-request-id": "alice-conv-1"})
        self.assertEqual(status, 200, theirs)
        self.assertEqual(hdrs["x-request-id"], "alice-conv-1")  # the header still echoes it
        self.assertNotIn("alice-conv-1", mine["id"] + theirs["id"])
        self.assertNotEqual(mine["id"], theirs["id"])
        self.assertRegex(theirs["id"], ID_RE)
        for item in mine["output"]:
            self.assertNotIn("alice-conv-1", item["id"])
        status, _, listed = self.gw.json("GET", f"/v1/responses/{mine['id']}/input_items", headers=auth("A"))
        self.assertEqual(status, 200, listed)
        self.assertEqual([i["content"][0]["text"] for i in listed["data"]], ["alice's words"])
        for i in listed["data"]:
            self.assertNotIn("alice-conv-1", i["id"])
        self.assertEqual(self.gw.json("GET", "/v1/responses/resp_alice-conv-1", headers=auth("A"))[0], 404)


class StoreChangesTest(CallersBase):
    """/api/pull, /api/delete and the Ollama unload by each caller; [store] allows the loopback fixture."""

    table = "[store]\nallow_private_sources = true\n"

    def test_non_admins_may_not_pull_delete_or_unload(self):
        url = self.http.add("/files/victim.gguf", self.other_gguf)
        before = sha256(self.m1_path)
        for who in ("A", "B", "C"):
            with self.subTest(who=who):
                status, body = self.ollama(who, "POST", "/api/pull", {"model": url, "stream": False})
                self.assertEqual(status, 403, body)
                self.assertIn("admin = true", body["error"])
                status, body = self.ollama(who, "DELETE", "/api/delete", {"model": "m4"})
                self.assertEqual(status, 403, body)
                status, body = self.ollama(who, "POST", "/api/generate", {"model": "m1", "keep_alive": 0})
                self.assertEqual(status, 403, body)
                self.assertIn("unload", body["error"])
        # C may not even see m2: that stays the 404 of a model that does not exist.
        status, body = self.ollama("C", "POST", "/api/generate", {"model": "m2", "keep_alive": 0})
        self.assertEqual(status, 404, body)
        self.assertFalse(os.path.exists(os.path.join(self.store, "victim.gguf")))
        self.assertEqual(sha256(self.m1_path), before)

    def test_admins_pull_delete_and_unload(self):
        """The store is not a target: an admin scoped to m1 changes it too, but unloads only m1."""
        url = self.http.add("/files/m4.gguf", self.other_gguf)
        for puller, deleter in (("ADMIN", "OPS1"), ("OPS1", "ADMIN")):
            with self.subTest(puller=puller, deleter=deleter):
                status, body = self.ollama(puller, "POST", "/api/pull", {"model": url, "stream": False})
                self.assertEqual((status, body), (200, {"status": "success"}))
                self.assertTrue(os.path.exists(os.path.join(self.store, "m4.gguf")))
                status, body = self.ollama(deleter, "DELETE", "/api/delete", {"model": "m4"})
                self.assertEqual(status, 200, body)
                self.assertFalse(os.path.exists(os.path.join(self.store, "m4.gguf")))
                status, body = self.ollama(deleter, "DELETE", "/api/delete", {"model": "m4"})
                self.assertEqual(status, 404, body)
        for who, model, want in (("ADMIN", "m2", 200), ("ADMIN", "m1", 200), ("OPS1", "m1", 200), ("OPS1", "m2", 404)):
            with self.subTest(who=who, model=model):
                status, body = self.ollama(who, "POST", "/api/chat", {"model": model, "messages": [], "keep_alive": 0})
                self.assertEqual(status, want, body)
                if want == 200:
                    self.assertEqual(body["done_reason"], "unload")

    def test_a_pull_never_replaces_a_served_file(self):
        url = self.http.add("/other/m1.gguf", self.other_gguf)  # names the file m1.gguf, which m1 serves
        before = sha256(self.m1_path)
        status, body = self.ollama("ADMIN", "POST", "/api/pull", {"model": url, "stream": False})
        self.assertEqual(status, 409, body)
        self.assertIn("target 'm1'", body["error"])
        self.assertIn("sipp pull --force", body["error"])
        self.assertIn("/v1/models/m1/unload", body["error"])
        self.assertEqual(sha256(self.m1_path), before)
        status, _, data = self.gw.request("POST", "/api/pull", {"model": url}, auth("ADMIN"))
        self.assertEqual(status, 200)  # streamed: the error is the last line
        self.assertIn("target 'm1'", ndjson(data)[-1]["error"])
        self.assertEqual(sha256(self.m1_path), before)

    def test_a_pull_never_replaces_a_stored_model_either(self):
        first = self.http.add("/one/m5.gguf", self.other_gguf)
        second = self.http.add("/two/m5.gguf", self.other_gguf[:-1] + b"x")
        self.assertEqual(self.ollama("ADMIN", "POST", "/api/pull", {"model": first, "stream": False})[0], 200)
        before = sha256(os.path.join(self.store, "m5.gguf"))
        status, body = self.ollama("ADMIN", "POST", "/api/pull", {"model": first, "stream": False})
        self.assertEqual(status, 200, body)  # the same model from the same URL: nothing to do
        status, body = self.ollama("ADMIN", "POST", "/api/pull", {"model": second, "stream": False})
        self.assertEqual(status, 409, body)
        self.assertIn("/api/delete", body["error"])
        self.assertEqual(sha256(os.path.join(self.store, "m5.gguf")), before)
        self.assertEqual(self.ollama("ADMIN", "DELETE", "/api/delete", {"model": "m5"})[0], 200)
        self.assertEqual(self.ollama("ADMIN", "POST", "/api/pull", {"model": second, "stream": False})[0], 200)

    def test_an_upstream_failure_is_a_502_naming_the_source(self):
        own = f"http://127.0.0.1:{self.gw.port}/v1/models/m1/file"  # answers 401 without a token
        status, body = self.ollama("ADMIN", "POST", "/api/pull", {"model": own, "stream": False})
        self.assertEqual(status, 502, body)
        self.assertIn(own, body["error"])
        self.assertIn("401", body["error"])
        missing = self.http.url("/files/missing.gguf")
        status, body = self.ollama("ADMIN", "POST", "/api/pull", {"model": missing, "stream": False})
        self.assertEqual(status, 502, body)
        self.assertIn(missing, body["error"])


class NoTokensTest(CallersBase):
    """Without tokens every call is the one admin caller; pulls keep to https and public addresses."""

    tokens = False
    table = f"[responses]\nmax_stored_bytes = {MAX_STORED_BYTES}\n"

    def test_everyone_is_the_owner(self):
        rid = self.create(None)["id"]
        self.assertEqual(self.outcomes(None, rid), (200, 200, 200, 200))

    def test_private_and_plain_http_sources_are_refused(self):
        url = self.http.add("/files/private.gguf", self.other_gguf)
        cases = [(url, "https://"), ("https://127.0.0.1:1/m.gguf", "127.0.0.1"), ("https://[::1]:1/m.gguf", "::1"),
                 ("https://169.254.169.254/m.gguf", "169.254.169.254"), ("https://localhost:1/m.gguf", "not a public")]
        for source, word in cases:
            with self.subTest(source=source):
                status, body = self.ollama(None, "POST", "/api/pull", {"model": source, "stream": False})
                self.assertEqual(status, 400, body)
                self.assertIn(word, body["error"])
                self.assertIn("allow_private_sources", body["error"])
        self.assertEqual(self.http.requests, [])
        self.assertFalse(os.path.exists(os.path.join(self.store, "private.gguf")))

    def test_unload_and_delete_need_no_token(self):
        status, body = self.ollama(None, "POST", "/api/generate", {"model": "m2", "keep_alive": 0})
        self.assertEqual((status, body["done_reason"]), (200, "unload"))
        status, body = self.ollama(None, "DELETE", "/api/delete", {"model": "m4"})
        self.assertEqual(status, 404, body)  # allowed, and there is no such model

    def test_a_response_over_max_stored_bytes_says_store_false(self):
        small = self.create(None)
        self.assertIs(small["store"], True)
        big = self.create(None, metadata={f"k{i}": "v" * 500 for i in range(16)})
        self.assertIs(big["store"], False)
        self.assertEqual(self.gw.json("GET", f"/v1/responses/{big['id']}")[0], 404)
        self.assertIn(f"response {big['id']} was not stored", self.gw.text())
        events = self.gw.sse("/v1/responses", {"model": "m1", "input": "x", "max_output_tokens": 2, "stream": True,
                                               "metadata": {f"k{i}": "v" * 500 for i in range(16)}})[2]
        final = json.loads(events[-1][1])["response"]
        self.assertIs(final["store"], False)

    def test_metadata_bounds(self):
        ok = {f"k{i}": "é" * 512 for i in range(16)}  # characters, not bytes
        ok["ķ" * 64] = ok.pop("k0")
        self.assertEqual(self.create(None, metadata=ok, store=False)["metadata"], ok)
        cases = [({f"k{i}": "v" for i in range(17)}, "16"), ({"k" * 65: "v"}, "64"), ({"k": "v" * 513}, "512"),
                 ({"k": 3}, "'metadata.k'"), (["k"], "'metadata'")]
        for md, word in cases:
            with self.subTest(md=str(md)[:40]):
                status, _, body = self.gw.json("POST", "/v1/responses", {"model": "m1", "input": "x", "metadata": md})
                self.assertEqual(status, 400, body)
                self.assertEqual(body["error"]["code"], "invalid_field")
                self.assertIn("metadata", body["error"]["message"])
                self.assertIn(word, body["error"]["message"])


class StoreConfigTest(unittest.TestCase):
    def test_bad_store_keys_are_named(self):
        path = gw.write("bad-store.toml", '[store]\nallow_private_sources = "yes"\nmirror = 1\n' + gw.local_target("m1"))
        r = subprocess.run([gw.SIPP, "serve", "--config", path, "--check"], capture_output=True, text=True,
                           timeout=gw.HTTP_TIMEOUT_S)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("[store]", r.stderr)
        self.assertIn("allow_private_sources", r.stderr)
        self.assertIn("mirror", r.stderr)


if __name__ == "__main__":
    unittest.main()
