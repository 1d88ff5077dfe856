"""The `rackmath` command. Command groups live in sibling modules, each with ``register(app)``.

Every error a user can cause prints one line (``error: field: problem (accepted: …)``)
and exits with status 2; nothing prints a traceback. Warnings about skipped user catalog entries
(``warning: FILE [KIND 'NAME']: FIELD: problem (entry skipped)``) go to stderr after a command that
succeeds; a command that fails prints its one error line only.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from .. import cli as _pkg

def _new_app() -> typer.Typer:
    app = typer.Typer(
        name="rackmath",
        help="The math behind how LLMs are trained and served: rooflines on real chips, models and prices.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.callback()(_root)
    return app


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

    TABLE_SETTINGS.update(wide=wide, columns=columns, printed=0)
    if catalog:
        from ..specs.catalog import add_catalog_dir

        for d in catalog:
            add_catalog_dir(d)


_SKIP = {"main", "common"}
MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(_pkg.__path__)
                       if m.name not in _SKIP and not m.name.startswith("_")))
# The top-level command (or group) names each module registers, so that a command line imports and builds only
# its own module (typer builds every command's options: ~35 ms of a cold start for the 41 commands). A test checks
# this table against what registering every module gives.
COMMAND_MODULE = {
    "batching": "batching", "compare": "compare", "hardware": "hardware", "layout": "layout", "racks": "layout",
    "lecture": "lecture", "measure": "measure", "model": "model", "plan": "plan", "plot": "plot", "price": "price",
    "cache": "price", "context": "price", "roofline": "roofline", "sweep": "roofline", "serve": "serve",
    "simulate": "simulate", "train": "train", "overtrain": "train", "revnet": "train", "scaling": "train",
    "validate": "validate", "web": "web",
}


def build_app(modules=MODULES) -> typer.Typer:
    """The typer app with the commands of ``modules`` (default: every command module)."""
    app = _new_app()
    for m in modules:
        importlib.import_module(f"{_pkg.__name__}.{m}").register(app)
    return app


def _modules_for(argv: list[str]) -> tuple[str, ...]:
    """The one module a command line needs (its first word after the root options), or every module when the
    line names no known command (`--help`, a typo: click then lists or refuses the commands as always)."""
    from .common import _ROOT_VALUE_OPTIONS

    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _ROOT_VALUE_OPTIONS else 1
    module = COMMAND_MODULE.get(argv[i]) if i < len(argv) else None
    return (module,) if module else MODULES


def __getattr__(name):  # `rackmath.cli.main.app`: every command (the docs' and tests' walk of the tree)
    if name == "app":
        globals()["app"] = build_app()
        return globals()["app"]
    raise AttributeError(name)


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


_COMMANDS: dict = {}


def command(argv: list[str] | None = None):
    """The click command tree for a command line (every command when ``argv`` is None), with every integer and
    float option bounded (rackmath.bounds)."""
    modules = MODULES if argv is None else _modules_for(argv)
    if modules not in _COMMANDS:
        from ..bounds import bound_cli

        cmd = typer.main.get_command(build_app(modules))
        bound_cli(cmd)
        _COMMANDS[modules] = cmd
    return _COMMANDS[modules]


def _fail(line: str, code: int = 2):
    sys.stderr.write("error: " + " ".join(str(line).split()) + "\n")
    sys.exit(code)


def _warn(lines: list[str]) -> None:
    for line in lines:
        sys.stderr.write("warning: " + " ".join(str(line).split()) + "\n")


def _bug(exc: BaseException):
    """Anything not caused by input: one line with the version, never a bare traceback
    (RACKMATH_DEBUG=1 re-raises it for a developer)."""
    import os

    if os.environ.get("RACKMATH_DEBUG"):
        raise exc
    from .. import __version__

    where = ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
    _fail(f"internal error in rackmath {__version__}: {type(exc).__name__}: {str(exc)[:300]}{where} — "
          "this is a bug; please report it with the command line", 3)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error a user can cause (ours and click's usage errors) is one line, exit status 2.

    The funnel (docs/architecture.md, "Bounds and errors"): RackmathError and click usage errors name the field;
    OS errors name the file (or the output when the OS gives none, e.g. ENOSPC on /dev/full); arithmetic that
    absurd input drives past float range (Overflow/ZeroDivision/FloatingPointError), nesting too deep to read
    (RecursionError), Python's int-digit limit and exhausted memory are one line with exit 2; anything else
    is a one-line bug report with the version (exit 3). Numerical warnings are silenced (rackmath.bounds.quiet).
    """
    import errno
    import os

    # numpy's OpenBLAS starts a thread per core at import (~100 ms of CPU, ~10 ms of wall on a cold start);
    # rackmath's arrays are small, so one thread unless the user chose otherwise
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import click

    from ..bounds import quiet
    from ..errors import RackmathError

    from .common import normalize_argv

    from ..specs import catalog

    from . import common

    argv = normalize_argv(list(sys.argv[1:] if argv is None else argv))
    pending: list[str] = []  # catalog and command warnings, printed only if it succeeds (errors stay one line)
    old_handler = catalog.set_warning_handler(pending.append)
    common.PENDING = pending
    try:
        with quiet():
            rc = command(argv).main(args=argv, prog_name="rackmath", standalone_mode=False)
        _warn(pending)
    except RackmathError as exc:
        from .common import as_typed

        _fail(as_typed(exc, argv, command(argv)))
    except click.exceptions.NoArgsIsHelpError as exc:  # `rackmath`, `rackmath batching`: the help, as before
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        _fail(_usage_line(exc))
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        _fail("aborted", 1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        try:  # nobody reads the rest: silence the flush at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        sys.exit(0)
    except OSError as exc:  # a file that cannot be read or written: the user's environment, not a bug
        reason = exc.strerror or str(exc) or type(exc).__name__
        if exc.filename is not None:
            _fail(f"file: {exc.filename}: {reason}")
        if exc.errno == errno.ENOSPC:
            _fail(f"output: {reason} (accepted: a writable place with free space)")
        _fail(f"output: {reason}")
    except RecursionError:
        _fail("input: nested too deeply to read (accepted: files nested at most 64 levels)")
    except MemoryError:
        _fail("input: needs more memory than this machine has (accepted: smaller ranges, counts or sizes)")
    except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
        _fail(f"input: a value is outside the range rackmath can compute ({exc}) "
              "(accepted: physically sensible, finite values; see the command's --help)")
    except ValueError as exc:
        if "digits" in str(exc) and "int" in str(exc):  # Python's int-digit limit (sys.set_int_max_str_digits)
            _fail("input: a number with too many digits (accepted: numbers up to 30 digits)")
        _bug(exc)
    except Exception as exc:  # noqa: BLE001 — the last line of defence: a bug report, never a traceback
        _bug(exc)
    finally:
        catalog.set_warning_handler(old_handler)
        common.PENDING = None
    if isinstance(rc, int) and rc:
        sys.exit(rc)
