"""Serving-stack versions as data: ``--framework STACK@VERSION`` and every record's ``stack_version`` (issue 34).

The versions live in ``specs/data/launch/stacks.toml`` (``[[_stack_version]]`` tables): the stack, its version, the
engine whose scheduling rules and fitted host times it uses (``analyses.serving.inputs.STACKS``,
``engine.efficiency.stack_sched_s`` …), the container images that ran it, the share of HBM it lets weights + KV fill
and the source of each. ``--framework sglang`` means the newest listed version (every listed version has shipped
records: tests), ``--framework sglang@0.5.6`` that version, ``--framework vllm@0.13`` the newest 0.13.x; an unknown
version is a one-line error listing the known ones. A stack with no listed version (``vllm-v0``, ``jax``, the generic
stack) is unversioned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import CatalogError, InputError
from .catalog import _read_toml

DATA = Path(__file__).parent / "data" / "launch" / "stacks.toml"

#: Other spellings of the stacks' names (InferenceMAX's ``trt``, ``dynamo-trt``; the package names).
STACK_ALIASES = {"trt": "trtllm", "tensorrt-llm": "trtllm", "trt-llm": "trtllm", "tensorrt_llm": "trtllm",
                 "dynamo-trt": "dynamo-trtllm", "dynamo-tensorrt-llm": "dynamo-trtllm", "sgl": "sglang",
                 "sglang-disagg": "sglang"}

_FIELDS = {"stack": str, "version": str, "engine": str, "date": str, "images": list, "mem_fraction": float,
           "source": str}


@dataclass(frozen=True)
class StackVersion:
    """One version of one serving stack (a ``[[_stack_version]]`` table)."""

    stack: str
    version: str
    engine: str  # the scheduling rules and fitted host times it uses: trtllm, vllm or sglang
    date: str
    images: tuple
    mem_fraction: float  # share of each GPU's HBM the stack lets weights + KV fill
    source: str

    @property
    def label(self) -> str:
        """``stack@version`` (what ``serve`` prints and ``--json`` carries)."""
        return f"{self.stack}@{self.version}"

    @property
    def platform(self) -> str:
        """``rocm`` for a build whose images are ROCm builds (AMD GPUs), else ``cuda``."""
        return "rocm" if any("rocm" in i.lower() for i in self.images) else "cuda"

    def as_dict(self) -> dict:
        return {"stack": self.stack, "version": self.version, "label": self.label, "engine": self.engine,
                "date": self.date, "images": list(self.images), "mem_fraction": self.mem_fraction,
                "source": self.source}


def version_key(version: str) -> tuple:
    """Order of versions: numbers numerically; ``rc``/``dev``/``pre``/``a``/``b`` before the release, ``post`` and
    build suffixes after it (1.2.0rc2 < 1.2.0 < 1.2.0.post1 < 1.2.0.post1-mori)."""
    out = []
    for tok in re.findall(r"\d+|[a-z]+", str(version).lower()):
        if tok.isdigit():
            out.append((3, int(tok)))
        elif tok in ("rc", "dev", "pre", "a", "b", "alpha", "beta"):
            out.append((-1, 0))
        else:  # post, build names
            out.append((1, 0))
    return tuple(out) + ((0, 0),)


@lru_cache(maxsize=1)
def stack_versions() -> tuple:
    """Every listed stack version, in file order (read once)."""
    doc = _read_toml(DATA)
    out, seen = [], set()
    for i, t in enumerate(doc.get("_stack_version", [])):
        where = f"_stack_version[{i}]"
        for k, typ in _FIELDS.items():
            v = t.get(k)
            if typ is float and isinstance(v, (int, float)) and not isinstance(v, bool):
                continue
            if not isinstance(v, typ) or (typ is str and not v.strip()):
                raise CatalogError(str(DATA), f"{where}.{k}", f"{v!r} (accepted: a {typ.__name__})")
        if not 0.1 <= float(t["mem_fraction"]) <= 1.0:
            raise CatalogError(str(DATA), f"{where}.mem_fraction", f"{t['mem_fraction']!r} (accepted: 0.1 … 1)")
        sv = StackVersion(t["stack"], t["version"], t["engine"], t["date"], tuple(t["images"]),
                          float(t["mem_fraction"]), t["source"])
        if sv.label in seen:
            raise CatalogError(str(DATA), f"{where}.version", f"{sv.label} listed twice")
        seen.add(sv.label)
        out.append(sv)
    return tuple(out)


def month_of(date) -> float | None:
    """A date ``YYYY[-MM[-DD]]`` (a record's, a listed version's) as months since year 0, a month without its day or a
    year without its month at its middle; None for none."""
    if not date:
        return None
    parts = [int(x) for x in str(date).split("-")]
    if len(parts) == 1:
        return parts[0] * 12.0 + 6.0
    return parts[0] * 12.0 + parts[1] - 1 + ((parts[2] - 1) / 31 if len(parts) > 2 else 0.5)


@lru_cache(maxsize=1)
def release_months() -> dict:
    """{``stack@version``: its release as months since year 0 (:func:`month_of` of its ``date``)} for every listed
    version."""
    return {sv.label: month_of(sv.date) for sv in stack_versions()}


def stack_name(name: str) -> str:
    """The canonical name of a stack (aliases resolved, lower case)."""
    key = str(name).strip().lower()
    return STACK_ALIASES.get(key, key)


def versions_of(stack: str) -> list:
    """The listed versions of one stack, oldest first."""
    s = stack_name(stack)
    return sorted((v for v in stack_versions() if v.stack == s), key=lambda v: version_key(v.version))


def known_labels() -> list:
    """Every ``stack@version``, grouped by stack, oldest first."""
    return list(_known_labels())


@lru_cache(maxsize=1)
def _known_labels() -> tuple:
    out = []
    for s in dict.fromkeys(v.stack for v in stack_versions()):
        out += [v.label for v in versions_of(s)]
    return tuple(out)


def _matches(given: str, version: str) -> bool:
    """``given`` names ``version`` exactly or as a leading run of its dot-separated parts (0.13 → 0.13.0)."""
    if given == version:
        return True
    g, v = given.split("."), re.split(r"[.]", version)
    return len(g) <= len(v) and v[:len(g) - 1] == g[:-1] and (v[len(g) - 1] == g[-1]
                                                               or re.match(re.escape(g[-1]) + r"(?!\d)",
                                                                           v[len(g) - 1]) is not None)


#: The build platform of a chip's vendor (a stack named without a version takes its newest build for it).
PLATFORM_OF_VENDOR = {"amd": "rocm", "nvidia": "cuda"}


def resolve(framework: str, platform: str | None = None):
    """``STACK[@VERSION]`` → (canonical stack name, :class:`StackVersion` or None for an unversioned stack).

    No version: the newest listed one — the newest build for ``platform`` (``rocm``, ``cuda``) where one is listed
    for it (``--framework sglang`` on a B200 is the newest CUDA build, on an MI355X the newest ROCm build). A version: the exact one, else the newest whose version starts with it
    (``vllm@0.13`` → 0.13.0, ``trtllm@1.2`` → 1.2.0rc2). An unknown version of a versioned stack, or a version of a
    stack that has none, raises :class:`InputError` naming ``framework`` and listing the known versions.
    """
    text = str(framework).strip()
    name, _, ver = text.partition("@")
    stack = stack_name(name)
    vs = versions_of(stack)
    if not ver:
        mine = [v for v in vs if platform is None or v.platform == platform]
        return stack, ((mine or vs)[-1] if vs else None)
    ver = ver.strip().lower().lstrip("v")
    exact = [v for v in vs if v.version.lower() == ver]
    hits = exact or [v for v in vs if _matches(ver, v.version.lower())]
    if hits:
        return stack, hits[-1]
    known = ", ".join(v.label for v in vs) if vs else f"{stack} has no listed versions; known: " + ", ".join(
        known_labels())
    raise InputError("framework", f"unknown stack version {text[:80]!r}", known)


HOSTS = Path(__file__).parent / "data" / "launch" / "stack_hosts.toml"
#: The speeds a version may carry in ``stack_hosts.toml`` (key there → key of :func:`host_times`), each a share of
#: another time in (0, 2]: its prefill speed relative to the kernel curves (``serving.steps.prefill_speed_step``) and
#: its first wave's passes relative to its steady ones (``serving.schedule.first_wave_pass``).
SPEED_KEYS = {"prefill_eta": "prefill", "wave_eta": "wave"}


def _version_rows(path: Path, key: str):
    """(index, stack_version, table) of each ``[[key]]`` table of a derived file of per-version numbers (none when
    the file is absent); a table without its ``stack_version`` is one catalog error naming it."""
    if not path.exists():
        return
    for i, t in enumerate(_read_toml(path).get(key, [])):
        label = t.get("stack_version")
        if not isinstance(label, str):
            raise CatalogError(str(path), f"{key}[{i}].stack_version", "missing")
        yield i, label, t


@lru_cache(maxsize=1)
def _host_table() -> dict:
    out = {}
    for i, label, t in _version_rows(HOSTS, "_stack_host"):
        vals = {}
        for k, hi in (("sched", 0.05), ("seq", 1e-3), ("eager", 1e-3), ("request", 10.0), ("kernel", 1e-4),
                      ("warm", 60.0)):
            v = t.get(f"{k}_s")
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < hi:
                raise CatalogError(str(HOSTS), f"_stack_host[{i}].{k}_s", f"{v!r} (accepted: 0 … {hi:g} s)")
            vals[k] = float(v)
        for key, k in SPEED_KEYS.items():  # speeds relative to another time (shares, not times)
            v = t.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 2:
                raise CatalogError(str(HOSTS), f"_stack_host[{i}].{key}", f"{v!r} (accepted: 0 < η ≤ 2)")
            vals[k] = float(v)
        out[label] = vals
    return out


def host_times(label: str) -> dict:
    """A stack version's host times fitted with the silicon fixed from measured kernel curves
    (``specs/data/launch/stack_hosts.toml``, written by ``benchmarks/stack_fit.py``): ``{"sched": s, "seq": s,
    "eager": s, "request": s, "kernel": s, "warm": s, "prefill": η, "wave": η}`` ({} for a version without);
    ``kernel`` is the stack's time per kernel on top of the silicon's floor τ (launch gaps, unfused work:
    ``engine.efficiency.for_stack``), ``warm`` its warm-up paid by a closed-loop client's first wave
    (``serving.schedule.closed_loop_ttft``), ``prefill`` its prefill speed relative to the kernel curves
    (``prefill_eta``; ``serving.steps.prefill_speed_step``), ``wave`` the speed of a closed-loop client's first
    wave's passes relative to its steady ones (``wave_eta``; ``serving.schedule.first_wave_pass``)."""
    return dict(_host_table().get(str(label), {}))


HELDOUT = Path(__file__).parent / "data" / "launch" / "stack_heldout.toml"


@lru_cache(maxsize=1)
def _heldout_table() -> dict:
    out = {}
    for i, label, t in _version_rows(HELDOUT, "_stack_heldout"):
        err, n = t.get("heldout_error"), t.get("records")
        if isinstance(err, bool) or not isinstance(err, (int, float)) or not 0 <= err < 10:
            raise CatalogError(str(HELDOUT), f"_stack_heldout[{i}].heldout_error", f"{err!r} (accepted: 0 … 10)")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise CatalogError(str(HELDOUT), f"_stack_heldout[{i}].records", f"{n!r} (accepted: a whole number ≥ 1)")
        out[label] = {"error": float(err), "records": n}
    return out


def heldout(label: str) -> dict:
    """A stack version's out-of-sample error on its InferenceMAX runs (``specs/data/launch/stack_heldout.toml``,
    written by ``benchmarks/heldout_by_version.py`` from ``benchmarks/stack_fit.py``'s one-group-out dump):
    ``{"error": median |predicted / measured − 1|, "records": n}``, {} for a version without."""
    return dict(_heldout_table().get(str(label), {}))


def from_image(image: str):
    """The listed :class:`StackVersion` a container image ran (None if no version lists it)."""
    for v in stack_versions():
        if image in v.images:
            return v
    return None


__all__ = ["StackVersion", "stack_versions", "versions_of", "known_labels", "resolve", "from_image", "version_key",
           "stack_name", "STACK_ALIASES", "host_times", "heldout"]
