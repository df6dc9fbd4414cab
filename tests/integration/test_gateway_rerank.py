"""POST /v1/rerank (and /rerank, /v1/reranking): Jina's and Cohere's shape on a target loaded as a
reranker, the same scores as llama-server --rerank on the same model.

The reranker is sipp-synth --rerank: Qwen3's reranker shape (a qwen3 model with a rank head
cls.output over the labels yes and no, pooling rank), with random weights. Its score is P(yes) of
the softmax, so every score is in (0, 1) and the documents' scores differ.
"""

import math
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
import gguf_corrupt  # noqa: E402
from tests.support import api_fields, peer  # noqa: E402

SCORE_TOLERANCE = 1e-4
QUERY = "what do cats eat"
DOCS = ["Cats eat meat and fish.", "The stock market fell today.", "Kittens drink milk.",
        "A recipe for bread.", "Tigers are large cats."]
# An example per row of docs/api-fields.md's rerank rows, merged into a valid request.
EXAMPLES = {"model": {"model": "rr"}, "query": {"query": "cats"}, "documents": {"documents": [{"text": "a"}]},
            "top_n": {"top_n": 1}, "return_documents": {"return_documents": True}, "user": {"user": "u1"},
            "texts": {"texts": ["a"]}, "rank_fields": {"rank_fields": ["text"]},
            "max_chunks_per_doc": {"max_chunks_per_doc": 2}}


class Rerank(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = gw.synth_model("rerank.gguf", "--rerank")
        cls.g = gw.serve_config(gw.local_target("rr", path=cls.path, parallel=1, extra='pooling = "rank"') +
                                gw.local_target("last", path=cls.path, parallel=1, extra='pooling = "last"') +
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

    def test_each_pair_is_bos_query_document(self):
        # Llama 3's vocabulary adds BOS but neither EOS nor SEP: a pair is [BOS] query document, as
        # llama-server's format_prompt_rerank builds it (sipp added EOS and SEP before)
        def n(text):
            st, _, out = self.g.json("POST", "/tokenize", {"model": "rr", "content": text})
            self.assertEqual(st, 200, out)
            return len(out["tokens"])
        usage = self.rerank({"model": "rr", "query": QUERY, "documents": DOCS})["usage"]["prompt_tokens"]
        self.assertEqual(usage, sum(1 + n(QUERY) + n(d) for d in DOCS))

    def test_the_score_is_the_rank_head_on_the_last_token(self):
        # Qwen3's rank pooling: the softmax of cls.output over the last token's normed hidden state,
        # P(yes). The same model pooled "last" gives that state; the head's weights are read from
        # the file, and the score computed here must be what /v1/rerank says.
        with open(self.path, "rb") as f:
            head = gguf_corrupt.f32_tensor(f.read(), "cls.output.weight")
        n_embd = len(head) // 2
        docs = [" Cats eat fish.", " The market fell today."]

        def tokens(text):
            return self.g.json("POST", "/tokenize", {"model": "rr", "content": text})[2]["tokens"]
        scores = {r["index"]: r["relevance_score"]
                  for r in self.rerank({"model": "rr", "query": QUERY, "documents": docs})["results"]}
        for i, doc in enumerate(docs):
            with self.subTest(doc=doc):
                self.assertEqual(tokens(QUERY + doc), tokens(QUERY) + tokens(doc), "one text tokenizes as the pair")
                st, _, out = self.g.json("POST", "/v1/embed", {"model": "last", "input": QUERY + doc, "normalize": False})
                self.assertEqual(st, 200, out)
                h = out["embeddings"][0]
                yes, no = (sum(w * x for w, x in zip(head[r * n_embd:(r + 1) * n_embd], h)) for r in (0, 1))
                self.assertAlmostEqual(scores[i], 1 / (1 + math.exp(no - yes)), delta=SCORE_TOLERANCE)

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

    def test_a_remote_target_is_forwarded_the_body(self):
        front = gw.serve_config('[[targets]]\nname = "far"\ntype = "openai_compatible"\n'
                                f'base_url = "{self.g.base}/v1"\nmodel = "rr"\n')
        self.addCleanup(front.stop)
        body = {"query": QUERY, "documents": DOCS, "top_n": 3}
        st, _, out = front.json("POST", "/v1/rerank", {"model": "far", **body})
        self.assertEqual(st, 200, out)
        direct = self.rerank({"model": "rr", **body})
        self.assertEqual(out["results"], direct["results"])

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
        api_fields.check_rows(self, self.g, "rerank", "/v1/rerank", {"model": "rr", "query": QUERY, "documents": DOCS},
                              EXAMPLES)

    def test_an_embedding_request_on_the_reranker_is_refused(self):
        st, _, out = self.g.json("POST", "/v1/embeddings", {"model": "rr", "input": "hi"})
        self.assertEqual(st, 400, out)
        self.assertIn("rerank", out["error"]["message"])

    def test_same_scores_as_llama_server(self):
        base = peer.start(self, ["-m", self.path, "--rerank", "-c", "1024"], "llama-server-rerank.log")
        theirs = peer.post(base, "/v1/rerank", {"query": QUERY, "documents": DOCS})
        ours = self.rerank({"model": "rr", "query": QUERY, "documents": DOCS})
        peer_scores = {r["index"]: r["relevance_score"] for r in theirs["results"]}
        self.assertEqual([r["index"] for r in ours["results"]], [r["index"] for r in theirs["results"]])
        for r in ours["results"]:
            self.assertAlmostEqual(r["relevance_score"], peer_scores[r["index"]], delta=SCORE_TOLERANCE)
        self.assertEqual(ours["usage"], theirs["usage"])


class RerankServe(unittest.TestCase):
    def test_sipp_serve_model_rerank(self):
        path = gw.synth_model("rerank.gguf", "--rerank")
        g = gw.serve_model(path, "--rerank")
        self.addCleanup(g.stop)
        st, _, out = g.json("POST", "/v1/rerank", {"query": QUERY, "documents": DOCS, "top_n": 1})
        self.assertEqual(st, 200, out)
        self.assertEqual(len(out["results"]), 1)

    def test_sipp_serve_pooling_is_checked(self):
        for flags, words in ((["--pooling", "sum"], "--pooling 'sum' is not one of"),
                             (["--pooling", "mean", "--rerank"], "--rerank is --pooling rank")):
            with self.subTest(flags=flags):
                r = subprocess.run([gw.SIPP, "serve", gw.model(), "--port", "0", *flags], capture_output=True,
                                   text=True, timeout=gw.HTTP_TIMEOUT_S)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(words, r.stderr)


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
