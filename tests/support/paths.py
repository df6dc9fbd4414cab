"""Where the repository and the built binaries are. SIPP_BUILD names another build tree (relative to
the repository, or absolute)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("SIPP_BUILD", "build"))
SIPP = os.path.join(BUILD, "bin", "sipp")
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
# the pinned llama.cpp's vocabularies are laid out once, in build/, for every build tree
VOCAB_DIR = os.path.join(ROOT, "build", "llama", "vocab")
