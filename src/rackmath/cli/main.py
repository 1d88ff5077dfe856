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
    wide: bool = typer.Option(False, "--wide", help="Tables: every column, however wide (any command; "
                                                   "may also follow the command)."),
    columns: str = typer.Option(None, "--columns", metavar="A,B,…", help="Tables: only these columns (any command)."),
):
    """The math behind how LLMs are trained and served: rooflines on real chips, models and prices."""
    from .common import TABLE_SETTINGS

    TABLE_SETTINGS.update(wide=wide, columns=columns)
    if catalog:
        from ..specs.catalog import add_catalog_dir

        for d in catalog:
            add_catalog_dir(d)


_SKIP = {"main", "common"}
for _m in sorted(m.name for m in pkgutil.iter_modules(_pkg.__path__)):
    if _m not in _SKIP and not _m.startswith("_"):
        importlib.import_module(f"{_pkg.__name__}.{_m}").register(app)


def _usage_line(exc) -> str:
    """One line for click's usage errors (bad option value, missing argument, unknown option or command)."""
    import click

    param = getattr(exc, "param", None)
    hint = getattr(exc, "param_hint", None)
    if param is not None:
        names = [o for o in (getattr(param, "opts", None) or []) if o.startswith("--")] or \
            (param.opts if getattr(param, "opts", None) else [param.name or "value"])
        field = names[0] if param.param_type_name == "option" else str(param.human_readable_name)
    elif hint:
        field = hint if isinstance(hint, str) else " / ".join(hint)
    elif isinstance(exc, (click.NoSuchOption, click.BadOptionUsage)):
        field = exc.option_name
    elif str(exc.message).startswith("No such command"):
        field = "command"
    else:
        field = "usage"
    if isinstance(exc, click.MissingParameter):
        problem = "missing"
    elif isinstance(exc, click.NoSuchOption):
        problem = "no such option"
        if exc.possibilities:
            problem += "; closest: " + ", ".join(sorted(exc.possibilities))
    else:
        problem = " ".join(str(exc.message).split()).rstrip(".")
    cmd = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "rackmath"
    return f"{field}: {problem} (accepted: see `{cmd} --help`)"


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error a user can cause (ours and click's usage errors) is one line, exit status 2."""
    import click

    from ..errors import RackmathError

    from .common import normalize_argv

    argv = normalize_argv(list(sys.argv[1:] if argv is None else argv))
    try:
        rc = app(args=argv, prog_name="rackmath", standalone_mode=False)
    except RackmathError as exc:
        sys.stderr.write(f"error: {' '.join(str(exc).split())}\n")
        sys.exit(2)
    except click.exceptions.NoArgsIsHelpError as exc:  # `rackmath`, `rackmath batching`: the help, as before
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        sys.stderr.write(f"error: {_usage_line(exc)}\n")
        sys.exit(2)
    except click.ClickException as exc:
        sys.stderr.write(f"error: {' '.join(exc.format_message().split())}\n")
        sys.exit(exc.exit_code)
    except click.Abort:
        sys.stderr.write("error: aborted\n")
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # a file that cannot be read or written: the user's environment, not a bug
        if exc.filename is None:
            raise
        sys.stderr.write(f"error: file: {exc.filename}: {exc.strerror or exc}\n")
        sys.exit(2)
    if isinstance(rc, int) and rc:
        sys.exit(rc)
