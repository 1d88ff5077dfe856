"""Shared test fixtures.

Tests that read ../shared (lecture claims, published figures, real HuggingFace
configs) use the ``shared`` / ``model_configs`` fixtures, which skip with a clear
reason when the folder is absent (a user's clone); CI always has it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("RACKMATH_SHARED", Path(__file__).resolve().parents[2] / "shared"))


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED} (only in the development checkout; CI has it)")
    return SHARED


@pytest.fixture
def model_configs(shared) -> Path:
    return shared / "model-configs"


def run_cli(*args, env=None):
    """Run the CLI in-process; returns (exit_code, stdout, stderr)."""
    import contextlib
    import io

    from rackmath.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    old = dict(os.environ)
    if env:
        os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(old)
        from rackmath.specs import catalog

        catalog._user_dirs.clear()
        catalog.clear_caches()
    return code, out.getvalue(), err.getvalue()
