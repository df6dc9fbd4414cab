"""What this machine's CPU has, where a test or benchmark must run a program differently for it."""


def amx_host():
    """Whether the CPU has AMX (the amx_tile flag). The llama.cpp peer's source build, which loads its
    Sapphire Rapids module on such a CPU, dies of SIGILL (tilezero) in its AMX kernels on the Xeons
    these run on: llama-server then runs with --no-repack, and llama-bench without that module."""
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and "amx_tile" in line.split() for line in f)
