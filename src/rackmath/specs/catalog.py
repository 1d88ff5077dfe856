"""The catalog: TOML data files shipped with the package plus the user's own.

Every catalog file is TOML holding arrays of tables, one per entry, keyed by
kind: ``[[chip]]``, ``[[system]]``, ``[[model]]``, ``[[price_sheet]]``,
``[[efficiency]]``, ``[[memory_tier]]``. A file may hold any mix of kinds.

Shipped files live in ``rackmath/specs/data/**.toml``. Users add entries by
dropping files into a directory named by ``--catalog DIR`` (CLI) or the
``RACKMATH_CATALOG`` environment variable (several directories separated by
``os.pathsep``), or by calling :func:`add_catalog_dir`. A user entry with the same
name as a shipped one replaces it. Files are read, never written.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import CatalogError, UnknownNameError

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
    from .. import bounds

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


def _files(kind: str) -> list[tuple[Path, dict]]:
    dirs = catalog_dirs()
    out = list(_dir_files(DATA_DIR / _SHIPPED_DIR[kind])) if (DATA_DIR / _SHIPPED_DIR[kind]).is_dir() else []
    for d in dirs[1:]:
        out += _dir_files(d)
    return out


def entries(kind: str) -> list[Entry]:
    """All raw entries of one kind, shipped first, user files after (later wins on name clashes).

    Every table is checked against its kind's schema (:mod:`rackmath.specs.schema`: unknown fields, types,
    ranges), and one file may not define the same name twice."""
    from .schema import check_entry, has_schema

    checked = has_schema(kind)  # [[record]] tables are validated by specs/records.py
    out = []
    for path, doc in _files(kind):
        tables = doc.get(kind, [])
        if isinstance(tables, dict):
            tables = [tables]
        if not isinstance(tables, list):
            raise CatalogError(str(path), kind, "expected an array of tables ([[%s]])" % kind)
        seen: dict[str, int] = {}
        for i, t in enumerate(tables):
            if not isinstance(t, dict):
                raise CatalogError(str(path), kind, "expected a table ([[%s]])" % kind)
            if not checked:
                out.append(Entry(kind, t, path))
                continue
            check_entry(kind, t, str(path))
            key = norm(t["name"])
            if key in seen:
                raise CatalogError(str(path), f"{kind}.name",
                                   f"{t['name']!r} is defined twice in this file (entries {seen[key] + 1} and {i + 1})")
            seen[key] = i
            out.append(Entry(kind, t, path))
    return out


def latest(kind: str) -> list[Entry]:
    """Entries of one kind de-duplicated by name: a later entry (a user catalog) replaces an earlier one whole."""
    out: dict[str, Entry] = {}
    for e in entries(kind):
        out[norm(str(require(e, "name", (str,))))] = e
    return list(out.values())


def build_index(kind: str, field: str, hint: str, parse, idx: "Index | None" = None) -> "Index":
    """Parse every (latest) entry of ``kind`` with ``parse(entry)`` into an :class:`Index` by name and aliases."""
    idx = idx or Index(field, hint)
    for e in latest(kind):
        obj = parse(e)
        idx.add(obj, obj.name, getattr(obj, "aliases", ()), where=str(e.path))
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
        raise UnknownNameError(self.field, name, self.primary.keys(), self.hint)

    def __contains__(self, name: str) -> bool:
        return norm(name) in self.by_name

    def names(self) -> list[str]:
        return list(self.primary)

    def values(self) -> list:
        return list(self.primary.values())


def require(entry: Entry, key: str, types=(int, float, str)):
    """A required field of a catalog entry, with the file and field named when it is missing."""
    if key not in entry.data:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", f"missing (entry {entry.data.get('name', '?')!r})")
    v = entry.data[key]
    if types and not isinstance(v, types):
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", f"wrong type {type(v).__name__}")
    return v
