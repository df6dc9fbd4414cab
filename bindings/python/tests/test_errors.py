"""Failure paths: every error is a sipp.SippError subclass carrying a message a person can act on."""

import os
import unittest

import _support
import sipp


class ErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = sipp.Client()
        cls.ep = cls.client.add("m", sipp.local(_support.model(), backend="cpu", ctx_size=256, parallel=1,
                                                threads=_support.THREADS))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_missing_model_file(self):
        path = os.path.join(_support.tmpdir(), "no-such-model.gguf")
        with sipp.Client() as c:
            with self.assertRaises(sipp.NotFoundError) as cm:
                c.add("x", sipp.local(path, backend="cpu"))
            self.assertIn(path, str(cm.exception))
            self.assertIsInstance(cm.exception, FileNotFoundError)  # the built-in class catches it too
            self.assertEqual(cm.exception.status, "not_found")
            self.assertEqual(c.endpoints, {})  # a failed add leaves nothing behind
            self.assertRaises(sipp.InvalidArgumentError, c.query, "Hi")  # no endpoint yet

    def test_not_a_gguf_file(self):
        path = os.path.join(_support.tmpdir(), "garbage.gguf")
        with open(path, "wb") as f:
            f.write(b"this is not a model" * 100)
        with sipp.Client() as c, self.assertRaises(sipp.ModelError) as cm:
            c.add("x", sipp.local(path, backend="cpu"))
        self.assertIn("GGUF", str(cm.exception))

    def test_bad_local_options(self):
        self.assertRaises(sipp.InvalidArgumentError, sipp.local, _support.model(), ctx_size=-1)
        self.assertRaises(sipp.InvalidArgumentError, sipp.local, _support.model(), threads="two")
        self.assertRaises(sipp.InvalidArgumentError, sipp.local, 42)
        with sipp.Client() as c, self.assertRaises(sipp.InvalidArgumentError) as cm:
            c.add("x", sipp.local(_support.model(), backend="quantum"))
        self.assertIn("quantum", str(cm.exception))
        self.assertIn("vulkan", str(cm.exception))  # it lists the names
        with sipp.Client() as c:
            self.assertRaises(sipp.InvalidArgumentError, c.add, "x", "model.gguf")
            self.assertRaises(sipp.InvalidArgumentError, c.add, "", sipp.local(_support.model()))

    def test_bad_request_options(self):
        q = self.client.query
        cases = [
            (dict(temperature=-1), "temperature"),
            (dict(max_tokens=0), "max_tokens"),
            (dict(top_p=2.0), "top_p"),
            (dict(temperature="hot"), "temperature"),
            (dict(seed=-5), "seed"),
            (dict(stop=[""]), "stop"),
            (dict(timeout=0), "timeout"),
        ]
        for kw, word in cases:
            with self.subTest(**{k: repr(v) for k, v in kw.items()}):
                with self.assertRaises(sipp.InvalidArgumentError) as cm:
                    q("Hi", **kw)
                self.assertIn(word, str(cm.exception))
                self.assertIsInstance(cm.exception, ValueError)
        self.assertRaises(sipp.InvalidArgumentError, q, "")  # libsipp: the prompt is empty
        self.assertRaises(sipp.InvalidArgumentError, q, 42)
        self.assertRaises(TypeError, q, "Hi", max_token=3)  # a misspelt option is Python's TypeError

    def test_bad_messages(self):
        for messages in ([], "hello", [{"role": "user"}], [{"role": "user", "content": 3}], [42]):
            with self.subTest(messages=messages):
                self.assertRaises(sipp.InvalidArgumentError, self.client.chat, messages)

    def test_prompt_too_long_for_the_context(self):
        with self.assertRaises(sipp.ContextFullError) as cm:
            self.client.query("word " * 400, max_tokens=4)
        self.assertIn("context", str(cm.exception))

    def test_unknown_and_duplicate_endpoints(self):
        with self.assertRaises(sipp.NotFoundError) as cm:
            self.client.query("Hi", endpoint="nope")
        self.assertIn("nope", str(cm.exception))
        self.assertIn("m", str(cm.exception))  # it lists the known ones
        self.assertRaises(sipp.InvalidArgumentError, self.client.add, "m", sipp.local(_support.model()))

    def test_closed_client(self):
        c = sipp.Client()
        ep = c.add("m", sipp.local(_support.model(), backend="cpu", parallel=1, threads=_support.THREADS))
        c.close()
        c.close()  # idempotent
        for call in (lambda: c.query("Hi"), lambda: c.chat([("user", "Hi")]), lambda: c.embed("Hi"),
                     lambda: c.stats(), lambda: c.add("n", sipp.local(_support.model())),
                     lambda: c.query("Hi", endpoint=ep)):
            with self.assertRaises(sipp.ClosedError) as cm:
                call()
            self.assertIn("closed", str(cm.exception))
        # the endpoint object itself refuses too
        self.assertRaises(sipp.ClosedError, ep.submit, "Hi")

    def test_error_classes(self):
        for cls in (sipp.InvalidArgumentError, sipp.NotFoundError, sipp.ModelError, sipp.BackendError,
                    sipp.ClosedError, sipp.GatewayError, sipp.NotSupportedError):
            self.assertTrue(issubclass(cls, sipp.SippError))
        self.assertEqual(sipp.NotFoundError.__module__, "sipp")


if __name__ == "__main__":
    unittest.main()
