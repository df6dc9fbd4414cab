"""tests/support/npm.py: the pinned npm packages a test needs, installed on first use."""

import os
import subprocess

NPM_TIMEOUT_S = 300


def ensure(directory, *packages):
    """`npm ci --ignore-scripts` in directory (its package-lock.json pins every package with its
    integrity) unless node_modules already holds the packages."""
    if all(os.path.isdir(os.path.join(directory, "node_modules", p)) for p in packages):
        return
    r = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=directory,
                       capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    if r.returncode != 0:
        raise AssertionError(f"npm ci failed in {directory}:\n{r.stdout}\n{r.stderr}")
