"""API price sheets: what providers charge per token, as data (lecture 01:33–02:04).

Catalog TOML (``[[price_sheet]]``) gives prices in **$ per million tokens**, the way
providers publish them; inside rackmath every price is plain SI, **$ per token**
(``sheet.input == 5e-6`` for $5/Mtok). Fields:

* ``input``, ``output``: base prices (for DeepSeek, ``input`` is the cache-miss price);
* ``cache_read``: cached input / cache hit; ``cache_write_5m``, ``cache_write_1h``:
  cache writes with a 5-minute / 1-hour lifetime; ``cache_storage_per_hour``: storage
  fee per token-hour where a provider charges one;
* ``[[price_sheet.tiers]]``: long-context tiers, ``above = "200K"`` plus the prices
  that change (others stay at base);
* ``[price_sheet.fast_mode]``: fast-mode prices, the advertised ``speed_multiple`` and
  its own long-context ``tiers``.

Every sheet carries ``provider``, ``model``, ``date``, ``source`` and a ``status`` tag
(V read in the primary source, S third-party write-up, D derived, M unverified).
Users add sheets with ``--catalog DIR``; a sheet with a shipped name replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .. import units
from ..errors import CatalogError, InputError
from .catalog import Entry, Index, build_index, register_cache, require
from .schema import register_dataclass

PER_MTOK = 1e-6  # $/Mtok -> $/token
PRICE_KINDS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
STATUS_TAGS = ("V", "S", "D", "M")


@dataclass(frozen=True)
class PriceTier:
    """Prices that apply to prompts longer than ``above`` tokens ($/token; None = base price)."""

    above: float
    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None


@dataclass(frozen=True)
class FastMode:
    """A faster, dearer service level: prices ($/token) and the advertised speed multiple."""

    input: float
    output: float
    speed_multiple: float
    tiers: tuple = ()
    status: str = ""
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class PriceSheet:
    name: str
    provider: str
    model: str
    date: str
    source: str
    status: str
    input: float  # $/token
    output: float
    cache_read: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    cache_storage_per_hour: float | None = None  # $/token per hour held
    tiers: tuple = ()  # PriceTier, ascending `above`
    fast_mode: FastMode | None = None
    aliases: tuple = ()
    note: str = ""
    path: str = field(default="", compare=False)

    def price(self, kind: str = "input", context=0.0, fast: bool = False):
        """$/token of ``kind`` for a prompt of ``context`` tokens (vectorized in ``context``).

        The tier that applies is the last one whose ``above`` the context exceeds.
        """
        import numpy as np

        if kind not in PRICE_KINDS:
            raise InputError("kind", f"unknown price kind {kind!r}", ", ".join(PRICE_KINDS))
        src = self.fast_mode if fast else self
        if fast and src is None:
            raise InputError("fast", f"{self.name} has no fast mode", "a sheet with [price_sheet.fast_mode]")
        base = getattr(src, kind, None)
        if base is None:
            raise InputError("kind", f"{self.name} publishes no {kind} price",
                             ", ".join(k for k in PRICE_KINDS if getattr(src, k, None) is not None))
        ctx = np.asarray(context, dtype=float)
        out = np.full(ctx.shape, float(base))
        for t in src.tiers:
            v = getattr(t, kind, None)
            if v is not None:
                out = np.where(ctx > t.above, v, out)
        return out if out.ndim else float(out)

    def step(self, kind: str = "output", fast: bool = False) -> tuple[float, float] | None:
        """(boundary tokens, price above / price below) of the first long-context tier changing ``kind``."""
        src = self.fast_mode if fast else self
        if src is None:
            return None
        for t in src.tiers:
            v = getattr(t, kind, None)
            if v is not None:
                return t.above, v / getattr(src, kind)
        return None

    def per_mtok(self, kind: str, context=0.0, fast: bool = False):
        return self.price(kind, context, fast) / PER_MTOK

    def describe(self) -> dict:
        def mt(v):
            return None if v is None else round(v / PER_MTOK, 6)

        d = {"name": self.name, "provider": self.provider, "model": self.model, "date": self.date,
             "status": self.status, "source": self.source, "unit": "$/Mtok"}
        for k in PRICE_KINDS:
            d[k] = mt(getattr(self, k))
        d["cache_storage_per_hour"] = mt(self.cache_storage_per_hour)
        d["tiers"] = [{"above": t.above, **{k: mt(getattr(t, k)) for k in PRICE_KINDS if getattr(t, k) is not None}}
                      for t in self.tiers]
        if self.fast_mode:
            f = self.fast_mode
            d["fast_mode"] = {"input": mt(f.input), "output": mt(f.output), "speed_multiple": f.speed_multiple,
                              "price_multiple": f.output / self.output, "status": f.status, "source": f.source,
                              "note": f.note,
                              "tiers": [{"above": t.above, "input": mt(t.input), "output": mt(t.output)}
                                        for t in f.tiers]}
        d["note"] = self.note
        return d


register_dataclass("price_sheet", PriceSheet)


def _price(entry: Entry, table: dict, key: str, where: str, required: bool = False):
    if key not in table:
        if required:
            raise CatalogError(str(entry.path), f"{where}.{key}", f"missing (entry {entry.data.get('name', '?')!r})")
        return None
    v = table[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= 0) or v == float("inf"):
        raise CatalogError(str(entry.path), f"{where}.{key}",
                           f"{v!r} is not a price (accepted: a non-negative number of $ per million tokens)")
    return float(v) * PER_MTOK


def _tiers(entry: Entry, tables, where: str, kinds=PRICE_KINDS) -> tuple:
    if not isinstance(tables, list):
        raise CatalogError(str(entry.path), where, "expected an array of tables ([[...tiers]])")
    out = []
    for i, t in enumerate(tables):
        w = f"{where}[{i}]"
        if not isinstance(t, dict) or "above" not in t:
            raise CatalogError(str(entry.path), f"{w}.above", "missing (accepted: a token count such as '200K')")
        try:
            above = units.parse_count(t["above"], f"{w}.above")
        except InputError as exc:
            raise CatalogError(str(entry.path), f"{w}.above", exc.problem) from None
        unknown = [k for k in t if k != "above" and k not in kinds]
        if unknown:
            raise CatalogError(str(entry.path), f"{w}.{unknown[0]}", "unknown field (accepted: above, " + ", ".join(kinds) + ")")
        out.append(PriceTier(above, **{k: _price(entry, t, k, w) for k in kinds if k in t}))
    return tuple(sorted(out, key=lambda t: t.above))


def _aliases(entry: Entry) -> tuple:
    v = entry.data.get("aliases", ())
    if not isinstance(v, (list, tuple)) or not all(isinstance(a, str) for a in v):
        raise CatalogError(str(entry.path), "price_sheet.aliases", f"expected a list of strings, got {v!r}")
    return tuple(v)


def _base_price(entry: Entry, table: dict, key: str, where: str) -> float:
    """A sheet's input or output price: required and positive (ratios such as output/input divide by it)."""
    v = _price(entry, table, key, where, True)
    if v == 0:
        raise CatalogError(str(entry.path), f"{where}.{key}",
                           "0 is not a price here (accepted: a positive number of $ per million tokens)")
    return v


def parse_sheet(entry: Entry) -> PriceSheet:
    """Validate one ``[[price_sheet]]`` table; errors name the file and the field."""
    d = entry.data
    w = "price_sheet"
    name = str(require(entry, "name", (str,)))
    for key in ("provider", "model", "date", "source"):
        require(entry, key, (str,))
    status = str(d.get("status", "M"))
    if status not in STATUS_TAGS:
        raise CatalogError(str(entry.path), f"{w}.status", f"{status!r} (accepted: one of {', '.join(STATUS_TAGS)})")
    fm = None
    if "fast_mode" in d:
        f = d["fast_mode"]
        if not isinstance(f, dict):
            raise CatalogError(str(entry.path), f"{w}.fast_mode", "expected a table")
        sm = f.get("speed_multiple")
        if isinstance(sm, bool) or not isinstance(sm, (int, float)) or not sm > 0:
            raise CatalogError(str(entry.path), f"{w}.fast_mode.speed_multiple",
                               f"{sm!r} (accepted: a positive number, e.g. 2.5)")
        fm = FastMode(
            input=_base_price(entry, f, "input", f"{w}.fast_mode"),
            output=_base_price(entry, f, "output", f"{w}.fast_mode"),
            speed_multiple=float(sm),
            tiers=_tiers(entry, f.get("tiers", []), f"{w}.fast_mode.tiers", ("input", "output")),
            status=str(f.get("status", status)), source=str(f.get("source", d["source"])), note=str(f.get("note", "")),
        )
    storage = _price(entry, d, "cache_storage_per_hour", w)
    return PriceSheet(
        name=name, provider=d["provider"], model=d["model"], date=d["date"], source=d["source"], status=status,
        input=_base_price(entry, d, "input", w), output=_base_price(entry, d, "output", w),
        cache_read=_price(entry, d, "cache_read", w), cache_write_5m=_price(entry, d, "cache_write_5m", w),
        cache_write_1h=_price(entry, d, "cache_write_1h", w), cache_storage_per_hour=storage,
        tiers=_tiers(entry, d.get("tiers", []), f"{w}.tiers"), fast_mode=fm,
        aliases=_aliases(entry), note=str(d.get("note", "")), path=str(entry.path),
    )


@register_cache
@lru_cache(maxsize=1)
def price_sheets() -> Index:
    return build_index("price_sheet", "price sheet", "a price sheet such as claude-opus-4.6, gemini-3.1-pro, gpt-5.1, "
                       "deepseek-v3.2 (see `rackmath price --list`)", parse_sheet)


def load_price_sheet(name) -> PriceSheet:
    """A price sheet by name or alias (case-insensitive)."""
    if isinstance(name, PriceSheet):
        return name
    return price_sheets().get(name)
