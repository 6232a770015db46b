"""softrank.workers.tune_allocator: a process-wide speed setting that must be inert when
asked to be, and idempotent."""

import subprocess
import sys

import pytest

CODE = ("from softrank.workers import tune_allocator; "
        "print(tune_allocator(), tune_allocator())")


def _run(env_extra: dict[str, str]) -> str:
    import os

    env = {**os.environ, **env_extra}
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt only")
def test_tunes_once_on_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert _run({"SOFTRANK_MALLOC_DEFAULTS": "0"}) == "True True"


def test_opt_out_leaves_the_allocator_alone():
    assert _run({"SOFTRANK_MALLOC_DEFAULTS": "1"}) == "False False"
