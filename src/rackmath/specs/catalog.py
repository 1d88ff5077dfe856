"""The catalog: TOML data files shipped with the package plus the user's own.

Every catalog file is TOML holding arrays of tables, one per entry, keyed by
kind: ``[[chip]]``, ``[[system]]``, ``[[model]]``, ``[[price_sheet]]``,
``[[efficiency]]``, ``[[memory_tier]]``. A file may hold any mix of kinds.

Shipped files live in ``rackmath/specs/data/**.toml``. Users add entries by
dropping files into a directory named by ``--catalog DIR`` (CLI) or the
``RACKMATH_CATALOG`` environment variable (several directories separated by
``os.pathsep``), or by calling :func:`add_catalog_dir`. A user entry with the same
name as a shipped one replaces it. Files are read, never written.

Shipped data is checked strictly: a bad shipped entry raises :class:`~rackmath.errors.CatalogError` (a bug).
A bad *user* entry (schema, parse or name-clash error) or an unreadable user file is skipped instead and
kept as a :class:`Problem`: using that entry by name raises its error (one line naming file and field),
while every other entry works. Enumerating an :class:`Index` (``values()``, ``names()``: the list commands)
reports each problem once as a warning line (``warnings.warn`` with :class:`CatalogWarning`, or the handler
of :func:`set_warning_handler`; the CLI prints ``warning: …`` on stderr after a successful command).
"""

from __future__ import annotations

import os
import tomllib
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import CatalogError, RackmathError, UnknownNameError
from .schema import check_entry, has_schema
from .. import bounds

DATA_DIR = Path(__file__).parent / "data"
KINDS = ("chip", "system", "model", "price_sheet", "efficiency", "memory_tier", "record")

_user_dirs: list[Path] = []


@dataclass(frozen=True)
class Entry:
    """One raw table from a catalog file, with where it came from."""

    kind: str
    data: dict
    path: Path

    def where(self) -> str:
        return f"{self.path} [{self.kind} {self.data.get('name', '?')!r}]"

    @property
    def shipped(self) -> bool:
        """From the package's own data (checked strictly: a bad shipped entry is a bug)."""
        return is_shipped(self.path)


@lru_cache(maxsize=4096)
def is_shipped(path) -> bool:
    """Under the package's data directory."""
    try:
        return Path(path).resolve().is_relative_to(DATA_DIR.resolve())
    except (OSError, ValueError):
        return False


class CatalogWarning(UserWarning):
    """A user catalog entry or file was skipped (its problem is the message)."""


@dataclass(frozen=True)
class Problem:
    """A skipped user catalog entry (``name`` set when it has one) or file (``kind`` None): why, as the error
    that using it raises."""

    path: str
    kind: str | None
    name: str | None
    error: RackmathError
    aliases: tuple = ()
    position: int | None = None  # 1-based table number in its file, for entries without a usable name

    def line(self) -> str:
        """One line naming the file, the entry and the field: what the list commands print as a warning."""
        msg = " ".join(str(self.error).split())
        if msg.startswith(f"{self.path}: "):
            msg = msg[len(self.path) + 2:]
        if self.kind is None:
            return f"{self.path}: {msg} (file skipped)"
        who = repr(self.name) if self.name is not None else f"#{self.position or '?'}"
        return f"{self.path} [{self.kind} {who}]: {msg} (entry skipped)"

    def raise_(self):
        raise self.error.with_traceback(None)


_warning_handler = None
_reported: set[str] = set()


def set_warning_handler(fn):
    """Send catalog warning lines to ``fn(line)`` instead of ``warnings.warn``; returns the previous handler
    (None: ``warnings.warn``)."""
    global _warning_handler
    old, _warning_handler = _warning_handler, fn
    return old


def report(problems) -> None:
    """Warn once (per catalog state) about each skipped entry or file."""
    for p in problems:
        line = p.line()
        if line in _reported:
            continue
        _reported.add(line)
        if _warning_handler is not None:
            _warning_handler(line)
        else:
            warnings.warn(line, CatalogWarning, stacklevel=4)  # the caller of names()/values()


def add_catalog_dir(path: str | os.PathLike) -> None:
    """Add a user catalog directory (searched after the shipped data; its entries win)."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise CatalogError(str(p), "catalog", "not a directory (accepted: a directory of .toml files)")
    if p not in _user_dirs:
        _user_dirs.append(p)
    clear_caches()


def clear_caches() -> None:
    """Forget everything parsed so far (after the catalog directories change)."""
    _dir_files.cache_clear()
    _dir_scan.cache_clear()
    is_shipped.cache_clear()
    _reported.clear()
    for fn in _cache_clearers:
        fn()


_cache_clearers: list = []


def register_cache(fn):
    """Spec modules register their lru_caches so that a new catalog directory is seen."""
    _cache_clearers.append(fn.cache_clear)
    return fn


def catalog_dirs() -> list[Path]:
    env = [Path(p).expanduser() for p in os.environ.get("RACKMATH_CATALOG", "").split(os.pathsep) if p.strip()]
    for p in env:
        if not p.is_dir():
            raise CatalogError(str(p), "RACKMATH_CATALOG", "not a directory (accepted: a directory of .toml files)")
    return [DATA_DIR, *env, *_user_dirs]


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(bounds.MAX_FILE_BYTES + 1)
        if len(raw) > bounds.MAX_FILE_BYTES:
            raise CatalogError(str(path), "file", f"larger than {bounds.MAX_FILE_BYTES:,} bytes")
        doc = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(str(path), "toml", f"malformed TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise CatalogError(str(path), "toml", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise CatalogError(str(path), "toml", f"nested too deeply (accepted: at most {bounds.MAX_NESTING} levels)") \
            from None
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        raise CatalogError(str(path), "toml", f"malformed TOML: {str(exc)[:200]}") from None
    except OSError as exc:
        raise CatalogError(str(path), "file", f"cannot read: {exc.strerror or exc}") from None
    bounds.check_document(doc, str(path), "toml")
    return doc


# Shipped data is filed by kind, so a lookup parses only the folder it needs (cold start).
_SHIPPED_DIR = {"chip": "hardware", "system": "hardware", "model": "models", "price_sheet": "prices",
                "efficiency": "efficiency", "memory_tier": "tiers",
                "record": "records"}


@lru_cache(maxsize=None)
def _dir_files(d: Path) -> tuple[tuple[Path, dict], ...]:
    out = []
    for path in sorted(d.rglob("*.toml")):
        doc = _read_toml(path)
        unknown = [k for k in doc if k not in KINDS and not k.startswith("_") and k != "meta"]
        if unknown:
            raise CatalogError(str(path), unknown[0],
                               f"unknown entry kind (accepted: [[{']], [['.join(KINDS)}]])")
        out.append((path, doc))
    return tuple(out)


@lru_cache(maxsize=None)
def _dir_scan(d: Path) -> tuple[tuple[tuple[Path, dict], ...], tuple[Problem, ...]]:
    """A user directory read tolerantly: the readable files, and a Problem for each unreadable file or
    unknown entry kind (the file's other kinds are kept)."""
    out, problems = [], []
    try:
        paths = sorted(d.rglob("*.toml"))
    except OSError as exc:
        return (), (Problem(str(d), None, None, CatalogError(str(d), "catalog", f"cannot read: {exc.strerror or exc}")),)
    for path in paths:
        try:
            doc = _read_toml(path)
        except CatalogError as exc:
            problems.append(Problem(str(path), None, None, exc))
            continue
        for k in [k for k in doc if k not in KINDS and not k.startswith("_") and k != "meta"]:
            problems.append(Problem(str(path), None, None, CatalogError(
                str(path), k, f"unknown entry kind (accepted: [[{']], [['.join(KINDS)}]])")))
            doc = {kk: v for kk, v in doc.items() if kk != k}
        out.append((path, doc))
    return tuple(out), tuple(problems)


def _sources(kind: str) -> tuple[list[tuple[Path, dict]], list[Problem]]:
    """Shipped files of ``kind`` (strict), then every user directory's readable files, and the user files'
    problems."""
    dirs = catalog_dirs()
    out = list(_dir_files(DATA_DIR / _SHIPPED_DIR[kind])) if (DATA_DIR / _SHIPPED_DIR[kind]).is_dir() else []
    problems: list[Problem] = []
    for d in dirs[1:]:
        files, probs = _dir_scan(d)
        out += files
        problems += probs
    return out, problems


def _name_of(t) -> str | None:
    n = t.get("name") if isinstance(t, dict) else None
    return n if isinstance(n, str) and n.strip() and len(n) <= 200 else None


def _aliases_of(t) -> tuple:
    a = t.get("aliases", ()) if isinstance(t, dict) else ()
    return tuple(x for x in a if isinstance(x, str) and x.strip() and len(x) <= 200)[:64] \
        if isinstance(a, (list, tuple)) else ()


def _scan(kind: str) -> tuple[list, list[Problem]]:
    """Every table of ``kind`` in order (shipped first) as an Entry or, for a bad user table, a Problem;
    plus the problems of user files (unreadable, unknown kinds). A bad shipped table raises."""
    checked = has_schema(kind)  # [[record]] tables are validated by specs/records.py
    files, file_problems = _sources(kind)
    out: list = []
    for path, doc in files:
        strict = is_shipped(path)
        tables = doc.get(kind, [])
        if isinstance(tables, dict):
            tables = [tables]
        if not isinstance(tables, list):
            err = CatalogError(str(path), kind, "expected an array of tables ([[%s]])" % kind)
            if strict:
                raise err
            out.append(Problem(str(path), kind, None, err, position=1))
            continue
        items: list = []
        seen: dict[str, int] = {}
        for i, t in enumerate(tables):
            try:
                if not isinstance(t, dict):
                    raise CatalogError(str(path), kind, "expected a table ([[%s]])" % kind)
                if checked:
                    check_entry(kind, t, str(path))
                    key = norm(t["name"])
                    if key in seen:
                        raise CatalogError(str(path), f"{kind}.name", f"{t['name']!r} is defined twice in this "
                                                                      f"file (entries {seen[key] + 1} and {i + 1})")
                    seen[key] = i
                items.append(Entry(kind, t, path))
            except RackmathError as exc:
                if strict:
                    raise
                items.append(Problem(str(path), kind, _name_of(t), exc, _aliases_of(t), position=i + 1))
        # a name defined twice in one file is ambiguous: neither definition is used
        twice = {norm(p.name) for p in items if isinstance(p, Problem) and p.name is not None
                 and "defined twice" in str(p.error)}
        out += [x for x in items if not (isinstance(x, Entry) and checked and norm(x.data["name"]) in twice)]
    return out, file_problems


def entries(kind: str) -> list[Entry]:
    """All raw entries of one kind, shipped first, user files after (later wins on name clashes).

    Every table is checked against its kind's schema (:mod:`rackmath.specs.schema`: unknown fields, types,
    ranges), and one file may not define the same name twice. Shipped entries must pass (else CatalogError);
    bad user entries are left out (see :func:`latest_with_problems`)."""
    return [x for x in _scan(kind)[0] if isinstance(x, Entry)]


def latest_with_problems(kind: str) -> tuple[list[Entry], list[Problem]]:
    """Entries of one kind de-duplicated by name (a later entry, a user catalog's, replaces an earlier one whole;
    a bad later entry replaces it too: its name then raises its error), and the problems of the bad user entries
    and files."""
    items, problems = _scan(kind)
    out: dict[str, Entry | Problem] = {}
    nameless: list[Problem] = []
    for x in items:
        if isinstance(x, Entry):
            out[norm(str(require(x, "name", (str,))))] = x
        elif x.name is not None:
            out[norm(x.name)] = x
        else:
            nameless.append(x)
    good = [x for x in out.values() if isinstance(x, Entry)]
    bad = [x for x in out.values() if isinstance(x, Problem)]
    return good, problems + bad + nameless


def latest(kind: str) -> list[Entry]:
    """Entries of one kind de-duplicated by name: a later entry (a user catalog) replaces an earlier one whole.
    Bad user entries are left out."""
    return latest_with_problems(kind)[0]


def problem_of(entry: Entry, exc: RackmathError) -> Problem:
    return Problem(str(entry.path), entry.kind, _name_of(entry.data), exc, _aliases_of(entry.data))


def build_index(kind: str, field: str, hint: str, parse, idx: "Index | None" = None) -> "Index":
    """Parse every (latest) entry of ``kind`` with ``parse(entry)`` into an :class:`Index` by name and aliases.

    A shipped entry that fails raises; a user entry that fails (schema, ``parse``, a name or alias clash) is
    skipped: its name raises its error on lookup, and enumerating the index reports it as a warning."""
    idx = idx or Index(field, hint)
    good, problems = latest_with_problems(kind)
    before = list(idx.primary)
    # shipped entries first: a clash with a user entry's name or alias is the user entry's problem
    for e in sorted(good, key=lambda e: not e.shipped):
        try:
            obj = parse(e)
            idx.add(obj, obj.name, getattr(obj, "aliases", ()), where=str(e.path))
        except RackmathError as exc:
            if e.shipped:
                raise
            idx.skip(problem_of(e, exc))
    for p in problems:
        idx.skip(p)
    # listed in catalog order (a user entry that replaces a shipped one takes its place)
    order = list(dict.fromkeys(before + [norm(str(e.data.get("name", ""))) for e in good] + list(idx.primary)))
    idx.primary = {k: idx.primary[k] for k in order if k in idx.primary}
    return idx


def norm(name: str) -> str:
    """Names are matched case-insensitively; '_' and ' ' count as '-'."""
    return str(name).strip().lower().replace("_", "-").replace(" ", "-")


class Index:
    """Name -> object with aliases and closest-name suggestions."""

    def __init__(self, field: str, hint: str | None = None):
        self.field, self.hint = field, hint
        self.by_name: dict[str, object] = {}
        self.primary: dict[str, object] = {}
        self._owner: dict[str, tuple[str, str]] = {}  # key -> (entry name, file)
        self.bad: dict[str, Problem] = {}  # name or alias of a skipped user entry -> why
        self.skipped: list[Problem] = []  # every skipped user entry and file, reported when enumerated

    def skip(self, problem: Problem, warn: bool = True, names=None):
        """Record a skipped user entry (or file): its name and aliases raise its error on lookup (unless a
        good entry holds them); ``warn``: reported when the index is enumerated."""
        if warn and problem not in self.skipped:
            self.skipped.append(problem)
        if names is None:
            names = (problem.name, *problem.aliases) if problem.name is not None else ()
        for n in names:
            k = norm(n)
            if k not in self.by_name and k not in self.bad:
                self.bad[k] = problem

    def report(self) -> None:
        """Warn about the skipped entries (once per catalog state)."""
        report(self.skipped)

    def add(self, obj, name: str, aliases=(), where: str | None = None):
        """Add ``obj`` under its name and aliases. A name or alias already used by another entry is a
        CatalogError: an alias can never take over another entry's name (nor be ambiguous)."""
        keys = [norm(name)] + [norm(a) for a in aliases if norm(a) != norm(name)]
        for k, label in zip(keys, ["name"] + ["alias"] * (len(keys) - 1)):
            if k in self._owner and self._owner[k][0] != norm(name):
                other, other_where = self._owner[k]
                raise CatalogError(where or "catalog", f"{self.field}.{'aliases' if label == 'alias' else 'name'}",
                                   f"{label} {k!r} of {name!r} is already taken by {other!r}"
                                   + (f" ({other_where})" if other_where else "")
                                   + " (accepted: a name or alias no other entry uses)")
        self.primary[norm(name)] = obj
        for k in keys:
            self.by_name[k] = obj
            self._owner[k] = (norm(name), where or "")

    def get(self, name: str):
        key = norm(name)
        if key in self.by_name:
            return self.by_name[key]
        self.check_bad(name)
        raise UnknownNameError(self.field, name, self.primary.keys(), self.hint)

    def check_bad(self, name: str, unknown: bool = True) -> None:
        """Raise the error of a skipped user entry called ``name``; with ``unknown``, when ``name`` is not in
        the index at all and a user file or nameless table was skipped, raise that one's error (the name may
        be defined there)."""
        key = norm(name)
        if key in self.by_name:
            return
        if key in self.bad:
            self.bad[key].raise_()
        nameless = [p for p in self.skipped if p.name is None]
        if unknown and nameless:
            p = nameless[0]
            e = p.error
            what = f"{self.field} {str(name)[:60]!r} is not in the catalog and may be defined in this skipped " \
                   f"{'file' if p.kind is None else 'table'}"
            if isinstance(e, CatalogError):
                raise CatalogError(e.path, e.field, f"{e.problem}; {what}")
            raise CatalogError(p.path, getattr(e, "field", "catalog"), f"{e}; {what}")

    def is_bad(self, name: str) -> bool:
        return norm(name) not in self.by_name and norm(name) in self.bad

    def __contains__(self, name: str) -> bool:
        return norm(name) in self.by_name

    def names(self) -> list[str]:
        """Every entry's name (reports the skipped user entries as warnings)."""
        self.report()
        return list(self.primary)

    def values(self) -> list:
        """Every entry (reports the skipped user entries as warnings)."""
        self.report()
        return list(self.primary.values())


def require(entry: Entry, key: str, types=(int, float, str)):
    """A required field of a catalog entry, with the file and field named when it is missing."""
    if key not in entry.data:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", f"missing (entry {entry.data.get('name', '?')!r})")
    v = entry.data[key]
    if types and not isinstance(v, types):
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", f"wrong type {type(v).__name__}")
    return v
