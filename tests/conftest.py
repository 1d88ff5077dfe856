"""Shared test fixtures.

Tests that check against published figures and real HuggingFace configs use the
``shared`` / ``model_configs`` fixtures: copies shipped in this repository
(docs/reference/published.md, docs/reference/conventions.md and the package's
specs/data/hf-configs/*.json), so they run on a fresh clone and in CI; nothing reads ../shared.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs every property test on a fixed seed: a CI run must not fail by the luck of the draw. Locally the
# default profile keeps exploring new examples.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / "docs"  # holds reference/published.md and reference/conventions.md (shipped copies)
MODEL_CONFIGS = REPO / "src" / "rackmath" / "specs" / "data" / "hf-configs"


@pytest.fixture
def shared() -> Path:
    """The shipped reference folder: ``shared / "reference" / "published.md"``."""
    return SHARED


@pytest.fixture
def model_configs() -> Path:
    """The shipped HuggingFace config.json files (``hf:ORG/NAME`` in the CLI)."""
    return MODEL_CONFIGS


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
