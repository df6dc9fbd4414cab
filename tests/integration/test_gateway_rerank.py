"""POST /v1/rerank (and /rerank, /v1/reranking): Jina's and Cohere's shape on a target loaded as a
reranker, the same scores as llama-server --rerank on the same model.

The reranker is sipp-synth --rerank: Qwen3's reranker shape (a qwen3 model with a rank head
cls.output over the labels yes and no, pooling rank), with random weights. Its score is P(yes) of
the softmax, so every score is in (0, 1) and the documents' scores differ.
"""

import json
import os
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

PEER = os.path.expanduser("~/.cache/sipp/build-80fb11ac73e66d89eae2c6a91d8a77428fa733ed-peer/bin")
PEER_READY_S = 60
SCORE_TOLERANCE = 1e-4
QUERY = "what do cats eat"
DOCS = ["Cats eat meat and fish.", "The stock market fell today.", "Kittens drink milk.",
        "A recipe for bread.", "Tigers are large cats."]
SYNTH_TIMEOUT_S = 120
FIELDS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                      "api-fields.md")
# An example per row of docs/api-fields.md's rerank rows, merged into a valid request.
EXAMPLES = {"model": {"model": "rr"}, "query": {"query": "cats"}, "documents": {"documents": [{"text": "a"}]},
            "top_n": {"top_n": 1}, "return_documents": {"return_documents": True}, "user": {"user": "u1"},
            "texts": {"texts": ["a"]}, "rank_fields": {"rank_fields": ["text"]},
            "max_chunks_per_doc": {"max_chunks_per_doc": 2}}


def field_rows(api):
    """docs/api-fields.md's rows of api: (field, decision)."""
    rows = []
    with open(FIELDS) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 5 and cells[0] == api:
                rows.append((cells[1], cells[2]))
    return rows


def make_reranker(name, *extra):
    path = os.path.join(gw.tmpdir(), name)
    if not os.path.exists(path):
        r = subprocess.run([gw.SYNTH, "--out", path, "--vocab", gw.VOCAB, "--rerank", *gw.TINY, *extra],
                           capture_output=True, text=True, timeout=SYNTH_TIMEOUT_S)
        assert r.returncode == 0, r.stderr
    return path


def post(base, path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=gw.HTTP_TIMEOUT_S) as r:
        return json.loads(r.read())


def start_peer(test, args, log_name):
    """llama-server of the pinned source with args, or a skip naming why; stopped at cleanup."""
    server = os.path.join(PEER, "llama-server")
    if not os.access(server, os.X_OK):
        test.skipTest(f"{server} is not built (deps/build-source.sh peer builds it)")
    port = free_port()
    log = open(os.path.join(gw.tmpdir(), log_name), "w+")
    proc = subprocess.Popen([server, "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-np", "1", *args],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, LD_LIBRARY_PATH=PEER))

    def stop():
        proc.terminate()
        proc.wait(gw.STOP_TIMEOUT_S)
        log.close()
    test.addCleanup(stop)
    base = f"http://127.0.0.1:{port}"

    def ready():
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"llama-server exited with {proc.returncode}: {log.read()[-2000:]}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            time.sleep(gw.POLL_S)
            return False
    gw.wait_until(ready, PEER_READY_S, "llama-server to load the model")
    return base


class Rerank(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = make_reranker("rerank.gguf")
        cls.g = gw.serve_config(gw.local_target("rr", path=cls.path, parallel=1, extra='pooling = "rank"') +
                                gw.local_target("mean", path=cls.path, parallel=1, extra='pooling = "mean"') +
                                gw.local_target("chat", parallel=1))

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()

    def rerank(self, body, path="/v1/rerank", status=200):
        st, _, out = self.g.json("POST", path, body)
        self.assertEqual(st, status, out)
        return out

    def test_results_are_sorted_scored_and_cut_to_top_n(self):
        out = self.rerank({"model": "rr", "query": QUERY, "documents": DOCS})
        self.assertEqual(out["object"], "list")
        self.assertEqual(out["model"], "rr")
        results = out["results"]
        self.assertEqual(sorted(r["index"] for r in results), list(range(len(DOCS))), "top_n defaults to all")
        scores = [r["relevance_score"] for r in results]
        self.assertEqual(scores, sorted(scores, reverse=True))
        self.assertTrue(all(0 < s < 1 for s in scores), scores)
        self.assertGreater(len(set(scores)), 1, "the documents' scores differ")
        self.assertNotIn("document", results[0], "documents are returned only when asked")
        self.assertGreater(out["usage"]["prompt_tokens"], len(DOCS))
        self.assertEqual(out["usage"]["total_tokens"], out["usage"]["prompt_tokens"])
        top = self.rerank({"model": "rr", "query": QUERY, "documents": DOCS, "top_n": 2})["results"]
        self.assertEqual(top, results[:2])

    def test_documents_as_objects_and_returned(self):
        docs = [{"text": d, "id": i} for i, d in enumerate(DOCS)]
        plain = self.rerank({"model": "rr", "query": QUERY, "documents": DOCS})["results"]
        out = self.rerank({"model": "rr", "query": QUERY, "documents": docs, "return_documents": True})["results"]
        self.assertEqual([(r["index"], r["relevance_score"]) for r in out],
                         [(r["index"], r["relevance_score"]) for r in plain])
        for r in out:
            self.assertEqual(r["document"], docs[r["index"]])
        strings = self.rerank({"model": "rr", "query": QUERY, "documents": DOCS, "return_documents": True})
        self.assertEqual(strings["results"][0]["document"], {"text": DOCS[strings["results"][0]["index"]]})

    def test_aliases_answer_the_same(self):
        body = {"model": "rr", "query": QUERY, "documents": DOCS}
        first = self.rerank(body)
        for path in ("/rerank", "/v1/reranking"):
            with self.subTest(path=path):
                self.assertEqual(self.rerank(body, path), first)

    def test_a_target_not_loaded_for_ranking_is_refused_saying_why(self):
        for target in ("chat", "mean"):
            with self.subTest(target=target):
                out = self.rerank({"model": target, "query": QUERY, "documents": DOCS}, status=400)
                self.assertIn("not loaded as a reranker", out["error"]["message"])
                self.assertIn(f"'{target}'", out["error"]["message"])

    def test_bad_fields_are_named(self):
        cases = [({"documents": DOCS}, "'query'"), ({"query": QUERY}, "'documents'"),
                 ({"query": QUERY, "documents": []}, "'documents'"),
                 ({"query": QUERY, "documents": [1]}, "'documents[0]'"),
                 ({"query": QUERY, "documents": [{"txt": "a"}]}, "'documents[0]'"),
                 ({"query": QUERY, "documents": DOCS, "top_n": 0}, "'top_n'"),
                 ({"query": QUERY, "documents": DOCS, "return_documents": "yes"}, "'return_documents'"),
                 ({"query": QUERY, "texts": DOCS}, "'texts'"),
                 ({"query": QUERY, "documents": DOCS, "temperature": 0}, "'temperature'")]
        for body, name in cases:
            with self.subTest(body=body):
                out = self.rerank({"model": "rr", **body}, status=400)
                self.assertIn(name, out["error"]["message"])

    def test_the_field_table_rows(self):
        rows = field_rows("rerank")
        self.assertEqual({f for f, _ in rows}, set(EXAMPLES))
        for field, decision in rows:
            with self.subTest(field=field, decision=decision):
                body = {"model": "rr", "query": QUERY, "documents": DOCS, **EXAMPLES[field]}
                st, h, out = self.g.json("POST", "/v1/rerank", body)
                named = [n.strip() for n in (h.get("sipp-ignored") or "").split(",") if n.strip()]
                if decision == "refused":
                    self.assertEqual(st, 400, out)
                    self.assertIn(f"'{field}'", out["error"]["message"])
                else:
                    self.assertEqual(st, 200, out)
                    self.assertEqual(field in named, decision == "ignored", named)

    def test_an_embedding_request_on_the_reranker_is_refused(self):
        st, _, out = self.g.json("POST", "/v1/embeddings", {"model": "rr", "input": "hi"})
        self.assertEqual(st, 400, out)
        self.assertIn("rerank", out["error"]["message"])

    def test_same_scores_as_llama_server(self):
        base = start_peer(self, ["-m", self.path, "--rerank", "-c", "1024"], "llama-server-rerank.log")
        peer = post(base, "/v1/rerank", {"query": QUERY, "documents": DOCS})
        ours = self.rerank({"model": "rr", "query": QUERY, "documents": DOCS})
        peer_scores = {r["index"]: r["relevance_score"] for r in peer["results"]}
        self.assertEqual([r["index"] for r in ours["results"]], [r["index"] for r in peer["results"]])
        for r in ours["results"]:
            self.assertAlmostEqual(r["relevance_score"], peer_scores[r["index"]], delta=SCORE_TOLERANCE)
        self.assertEqual(ours["usage"], peer["usage"])


class RerankConfig(unittest.TestCase):
    def test_an_unknown_pooling_is_named_with_its_line(self):
        path = gw.write("pooling.toml", gw.local_target("rr", extra='pooling = "sum"'))
        r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                           timeout=gw.HTTP_TIMEOUT_S)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pooling: 'sum' is not one of none, mean, cls, last, rank", r.stderr)
        self.assertIn("pooling.toml:8:", r.stderr)


if __name__ == "__main__":
    unittest.main()
