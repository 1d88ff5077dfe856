"""The `rackmath` command. Command groups live in sibling modules, each with ``register(app)``.

Every error a user can cause prints one line (``error: field: problem (accepted: …)``)
and exits with status 2; nothing prints a traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from .. import cli as _pkg

app = typer.Typer(
    name="rackmath",
    help="The math behind how LLMs are trained and served: rooflines on real chips, models and prices.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    catalog: list[str] = typer.Option(
        [], "--catalog", metavar="DIR", help="Extra catalog directory of .toml files (also RACKMATH_CATALOG)."
    ),
):
    """The math behind how LLMs are trained and served: rooflines on real chips, models and prices."""
    if catalog:
        from ..specs.catalog import add_catalog_dir

        for d in catalog:
            add_catalog_dir(d)


_SKIP = {"main", "common"}
for _m in sorted(m.name for m in pkgutil.iter_modules(_pkg.__path__)):
    if _m not in _SKIP and not _m.startswith("_"):
        importlib.import_module(f"{_pkg.__name__}.{_m}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: click handles its own usage errors (exit 2); ours become one line, exit 2."""
    from ..errors import RackmathError

    try:
        app(args=argv, prog_name="rackmath")
    except RackmathError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)
    except BrokenPipeError:
        sys.exit(0)
