"""Integration tests of the gateway's TOML configuration: `sipp serve --check --config FILE`, errors
reported as FILE:LINE, and the rules that depend on the machine (model files, token variables,
non-loopback listen addresses)."""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
CHECK_TIMEOUT_S = 60


def check(text, env=None, name="check.toml"):
    path = gw.write(name, text)
    full_env = dict(os.environ)
    full_env.update(env or {})
    r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                       timeout=CHECK_TIMEOUT_S, env=full_env)
    return r, path


FULL = """\
[server]
listen = "127.0.0.1:8099"
max_request_bytes = 65536
max_concurrent_requests = 8
max_queue = 16
request_timeout_seconds = 120
shutdown_timeout_seconds = 5
allowed_origins = ["http://localhost:3000"]

[security.rate_limit]
requests_per_minute = 600
burst = 20

[[tokens]]
env = "SIPP_TEST_TOKEN_A"
caller = "alice"
targets = ["tiny"]

[[tokens]]
env = "SIPP_TEST_TOKEN_B"
caller = "bob"

[[targets]]
name = "tiny"
type = "local"
model = "{model}"
backend = "cpu"
ctx_size = 1024
parallel = 2
threads = 1
gpu_layers = 0
policy = "latency_first"

[[targets]]
name = "far"
type = "openai_compatible"
base_urls = ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1/"]
model = "upstream-model"
timeout_seconds = 30
"""

TOKENS = {"SIPP_TEST_TOKEN_A": "secret-a-0123456789", "SIPP_TEST_TOKEN_B": "secret-b-0123456789"}


class GatewayConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = gw.model()

    def test_full_config_is_valid(self):
        r, path = check(FULL.format(model=self.model), env=TOKENS)
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        self.assertIn("valid: 2 targets (tiny, far), 2 tokens, listen 127.0.0.1:8099", r.stdout)

    def test_relative_model_path(self):
        rel = os.path.relpath(self.model, gw.tmpdir())
        r, _ = check(f'[[targets]]\nname = "t"\nmodel = "{rel}"\n')
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)

    def assertProblem(self, r, path, line, *words):
        self.assertEqual(r.returncode, EXIT_RUNTIME, r.stderr)
        prefix = f"sipp: {path}:{line}:" if line else f"sipp: {path}:"
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith(prefix)]
        self.assertTrue(lines, f"no line starting with {prefix!r} in:\n{r.stderr}")
        for w in words:
            self.assertTrue(any(w in ln for ln in lines), f"{w!r} not in {lines}")

    def test_unknown_keys(self):
        text = (f'[server]\nlisten = "127.0.0.1:1"\nlisten_backlog = 5\n\n'
                f'[[targets]]\nname = "t"\nmodel = "{self.model}"\ncolour = "blue"\n\n[extra]\nx = 1\n')
        r, path = check(text)
        self.assertProblem(r, path, 3, "unknown key 'listen_backlog'", "[server]")
        self.assertProblem(r, path, 8, "unknown key 'colour'")
        self.assertProblem(r, path, 10, "unknown key 'extra'")

    def test_an_unknown_key_names_the_nearest_known_one(self):
        text = (f'[server]\nmax_qeue = 5\n\n[[targets]]\nname = "t"\nmodel = "{self.model}"\nctx_szie = 512\n'
                f'\n[[targest]]\nname = "u"\n')
        r, path = check(text)
        self.assertProblem(r, path, 2, "unknown key 'max_qeue' in [server] (did you mean 'max_queue'? known keys: listen,")
        self.assertProblem(r, path, 7, "unknown key 'ctx_szie' in target 't' (did you mean 'ctx_size'?")
        self.assertProblem(r, path, 9, "unknown key 'targest' in the top level (did you mean 'targets'?")

    def test_wrong_types(self):
        text = (f'[server]\nmax_queue = "many"\nallowed_origins = "x"\n\n'
                f'[[targets]]\nname = "t"\nmodel = "{self.model}"\nparallel = 1.5\n')
        r, path = check(text)
        self.assertProblem(r, path, 2, "max_queue", "expected an integer, found string")
        self.assertProblem(r, path, 3, "allowed_origins", "array")
        self.assertProblem(r, path, 8, "parallel", "integer")

    def test_out_of_range_and_bad_values(self):
        text = (f'[server]\nlisten = "nowhere"\nmax_concurrent_requests = 0\n\n'
                f'[[targets]]\nname = "t"\nmodel = "{self.model}"\npolicy = "fastest"\n'
                f'[[targets]]\nname = "u"\ntype = "smoke_signals"\n')
        r, path = check(text)
        self.assertProblem(r, path, 2, "HOST:PORT")
        self.assertProblem(r, path, 3, "out of range")
        self.assertProblem(r, path, 8, "policy", "fastest")
        self.assertProblem(r, path, 11, "smoke_signals")

    def test_lora_adapters(self):
        """lora = [{path, scale}]: a file, relative to the config file; a missing one, an unknown key or
        a scale out of range is named with its line."""
        rel = os.path.relpath(self.model, gw.tmpdir())  # any file passes --check; its load checks the GGUF
        good = f'[[targets]]\nname = "t"\nmodel = "{self.model}"\nlora = [{{path = "{rel}", scale = 0.5}}]\n'
        r, _ = check(good)
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        bad = (f'[[targets]]\nname = "t"\nmodel = "{self.model}"\n'
               f'lora = [{{path = "no-such-adapter.gguf"}}, {{path = "{rel}", scale = 500}}, {{file = "x"}}]\n')
        r, path = check(bad)
        self.assertProblem(r, path, 4, "target 't' lora[0] path:", "no-such-adapter.gguf' is not a file")
        self.assertProblem(r, path, 4, "lora[1]", "scale", "out of range")
        self.assertProblem(r, path, 4, "lora[2]", "unknown key 'file'")

    def test_a_lora_path_of_the_wrong_type_is_an_error(self):
        # It crashed the parser before the key tables (a path read as NULL).
        r, path = check(f'[[targets]]\nname = "t"\nmodel = "{self.model}"\nlora = [{{path = 1}}, {{scale = 0.5}}]\n')
        self.assertProblem(r, path, 4, "target 't' lora[0] path: expected a string, found integer")
        self.assertProblem(r, path, 4, "target 't' lora[1]: 'path' is missing")

    def test_duplicate_target_names(self):
        t = f'[[targets]]\nname = "same"\nmodel = "{self.model}"\n'
        r, path = check(t + "\n" + t)
        self.assertProblem(r, path, 5, "duplicate target name 'same'", "line 1")

    def test_dead_aliases_are_named(self):
        """An alias no request can reach: another target's name (which wins), or a plain name that an
        earlier target's glob always catches. Globs only partly shadowed, and aliases that do route,
        pass."""
        def target(name, *aliases):
            return f'[[targets]]\nname = "{name}"\nmodel = "{self.model}"\naliases = {list(aliases)!r}\n\n'.replace(
                "'", '"')
        text = (target("a", "gpt-*", "b") + target("b", "gpt-5", "claude-*", "a*") + target("c", "c", "o1"))
        r, path = check(text)
        self.assertProblem(r, path, None, "target 'a': alias 'b' is the name of target 'b'",
                           "target 'b': alias 'gpt-5' is never used: target 'a' has the alias 'gpt-*', listed earlier")
        bad = [ln for ln in r.stderr.splitlines() if "alias" in ln]
        self.assertEqual(len(bad), 2, r.stderr)  # "a*", "claude-*", "o1" and c's own name route
        r, _ = check(target("a", "gpt-4*") + target("b", "gpt-5", "claude-*"))
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)

    def test_toml_syntax_error(self):
        r, path = check('[server\nlisten = 1\n')
        self.assertProblem(r, path, 1)

    def test_no_targets(self):
        r, path = check('[server]\nlisten = "127.0.0.1:8080"\n')
        self.assertProblem(r, path, None, "no [[targets]]")

    def test_missing_model_file_and_backend(self):
        r, path = check('[[targets]]\nname = "t"\nmodel = "/nonexistent/m.gguf"\nbackend = "quantum"\n')
        self.assertProblem(r, path, 1, "/nonexistent/m.gguf", "cannot be read")
        self.assertProblem(r, path, 1, "backend", "quantum")

    def test_token_variable_unset(self):
        text = f'[[tokens]]\nenv = "SIPP_TEST_UNSET_VAR_X"\n\n[[targets]]\nname = "t"\nmodel = "{self.model}"\n'
        env = {"SIPP_TEST_UNSET_VAR_X": ""}
        r, path = check(text, env=env)
        self.assertProblem(r, path, 1, "SIPP_TEST_UNSET_VAR_X", "not set")

    def test_token_scope_names_unknown_target(self):
        text = (f'[[tokens]]\nenv = "SIPP_TEST_TOKEN_A"\ntargets = ["ghost"]\n\n'
                f'[[targets]]\nname = "t"\nmodel = "{self.model}"\n')
        r, path = check(text, env=TOKENS)
        self.assertProblem(r, path, 1, "'ghost'")

    def test_every_problem_is_reported(self):
        # issue 27 item 9: errors of the file (a duplicate target, a token scope naming no target)
        # used to hide those of the machine (an unset token variable, a missing model file) and of
        # the model headers; one --check lists them all.
        bad_header = gw.write("check-bad-header.gguf", "GGUF but not a header")
        text = (f'[[tokens]]\nenv = "SIPP_TEST_UNSET_VAR_Y"\ntargets = ["ghost"]\n\n'
                f'[[targets]]\nname = "t"\nmodel = "{self.model}"\n\n'
                f'[[targets]]\nname = "t"\nmodel = "{self.model}"\n\n'
                f'[[targets]]\nname = "u"\nmodel = "/nonexistent/u.gguf"\n\n'
                f'[[targets]]\nname = "v"\nmodel = "{bad_header}"\n')
        r, path = check(text, env={"SIPP_TEST_UNSET_VAR_Y": ""})
        self.assertProblem(r, path, 9, "duplicate target name 't'")
        self.assertProblem(r, path, 1, "'ghost'")
        self.assertProblem(r, path, 1, "SIPP_TEST_UNSET_VAR_Y", "not set")
        self.assertProblem(r, path, 13, "/nonexistent/u.gguf", "cannot be read")
        self.assertProblem(r, path, None, "target 'v'", bad_header)
        self.assertEqual(sum("u.gguf" in ln for ln in r.stderr.splitlines()), 1, r.stderr)

    def test_remote_target_needs_base_url(self):
        r, path = check('[[targets]]\nname = "r"\ntype = "openai_compatible"\n\n'
                        '[[targets]]\nname = "s"\ntype = "openai_compatible"\nbase_url = "ftp://x"\n')
        self.assertProblem(r, path, 1, "base_url")
        self.assertProblem(r, path, 8, "http://")

    def test_non_loopback_needs_auth(self):
        t = f'[[targets]]\nname = "t"\nmodel = "{self.model}"\n'
        r, path = check('[server]\nlisten = "0.0.0.0:8080"\n\n' + t)
        self.assertProblem(r, path, None, "refusing to listen on 0.0.0.0", "allow_unauthenticated")
        r, _ = check('[server]\nlisten = "0.0.0.0:8080"\nallow_unauthenticated = true\n\n' + t)
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        r, _ = check('[server]\nlisten = "0.0.0.0:8080"\n\n[[tokens]]\nenv = "SIPP_TEST_TOKEN_A"\n\n' + t, env=TOKENS)
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        r, _ = check('[server]\nlisten = "[::1]:8080"\n\n' + t)
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)

    def test_cli_usage_errors(self):
        def run(*args):
            return subprocess.run([gw.SIPP, "serve", *args], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)

        # (no MODEL at all serves the store: test_gateway_residency.py)
        self.assertEqual(run(self.model, "--models-dir", gw.tmpdir()).returncode, EXIT_USAGE)
        self.assertEqual(run("--check", self.model).returncode, EXIT_USAGE)
        self.assertEqual(run(self.model, "--port", "99999").returncode, EXIT_USAGE)
        self.assertEqual(run(self.model, "--bogus").returncode, EXIT_USAGE)
        self.assertEqual(run("--config", "x.toml", "--parallel", "2").returncode, EXIT_USAGE)
        r = run("--help")
        self.assertEqual(r.returncode, EXIT_OK)
        self.assertIn("--config FILE", r.stdout)
        r = run("/nonexistent/model.gguf", "--port", "0")
        self.assertEqual(r.returncode, EXIT_RUNTIME)
        self.assertIn("/nonexistent/model.gguf", r.stderr)
        r = run(self.model, "--host", "0.0.0.0", "--port", "0")
        self.assertEqual(r.returncode, EXIT_RUNTIME)
        self.assertIn("refusing to listen", r.stderr)

    def test_target_named_after_model_file(self):
        g = gw.serve_model(gw.model("my-model"))
        try:
            status, _, body = g.json("GET", "/v1/models")
            self.assertEqual([m["id"] for m in body["data"]], ["my-model"])
        finally:
            self.assertEqual(g.stop(), 0)


if __name__ == "__main__":
    unittest.main()
