"""tests/support/npm.py: the pinned npm packages a test needs, installed on first use.

Every test that needs a directory's packages calls ensure(directory): `npm ci` deletes node_modules
before it installs, so two shards that each ran it beside the other's running node (one checking
for playwright-core, the other for axe-core) once left a browser test waiting 600 s on a half
removed playwright-core. ensure installs every package the directory's package.json names, once,
under an exclusive lock on a file beside it; whoever waited on the lock finds them installed."""

import fcntl
import json
import os
import subprocess

NPM_TIMEOUT_S = 300
LOCK_NAME = ".npm-ci.lock"


def wanted(directory):
    """The packages directory's package.json names (dependencies and devDependencies)."""
    with open(os.path.join(directory, "package.json")) as f:
        pkg = json.load(f)
    return [*pkg.get("dependencies", {}), *pkg.get("devDependencies", {})]


def installed(directory):
    return all(os.path.isfile(os.path.join(directory, "node_modules", *p.split("/"), "package.json"))
               for p in wanted(directory))


def ensure(directory, *_packages):
    """`npm ci --ignore-scripts` in directory (its package-lock.json pins every package with its
    integrity) unless node_modules already holds every package of its package.json. (Callers may
    name the packages they use; all of them are installed either way.)"""
    with open(os.path.join(directory, LOCK_NAME), "w") as lock:
        # Checked under a shared lock: an install in progress has written some package.json files
        # before the rest of its packages.
        fcntl.flock(lock, fcntl.LOCK_SH)
        if installed(directory):
            return
        fcntl.flock(lock, fcntl.LOCK_UN)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(directory):
            return
        r = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=directory,
                           capture_output=True, text=True, timeout=NPM_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if r.returncode != 0 or not installed(directory):
            raise AssertionError(f"npm ci in {directory} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
