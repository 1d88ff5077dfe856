"""`rackmath web`: the lecture's blackboard in a browser (FastAPI + uvicorn + Plotly.js served locally).

Import :func:`create_app` lazily: the CLI never imports FastAPI unless `rackmath web` runs.
"""

from __future__ import annotations


def create_app(**kw):
    from .app import create_app as _create

    return _create(**kw)


__all__ = ["create_app"]
