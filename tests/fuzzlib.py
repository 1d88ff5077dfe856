"""Hostile-input generator for the CLI, shared by tests/test_fuzz.py (a fast in-process slice in CI) and
benchmarks/fuzz.py (≥ 10⁴ invocations in forked children with a memory limit and a timeout).

The command tree is enumerated from the click command built by ``rackmath.cli.main.command()``, so a
command or option another module adds is fuzzed without touching this file. Values are drawn through a
``Chooser`` so the same generator runs under hypothesis (``HypothesisChooser``) or a seeded
``random.Random`` (``RandomChooser``).

Outcome classes (:func:`classify`): ``ok`` (exit 0), ``clean`` (exit 2, one line ``error: …``),
``traceback`` (a traceback, a bug-report line, any other exit status, or a multi-line error), ``hang``
(past the time limit), ``oom`` (out of memory, or killed by a signal), ``overwritten`` (a file that existed
changed without ``--force``).
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
HF_DIR = HERE / "data" / "hf"
SENTINEL = "precious user data\n"

# ----------------------------------------------------------------------------------- values
HOSTILE = [
    "-1", "0", "-0", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e308", "-1e308", "1.8e308", "1e-320",
    "5e-324", "1" + "0" * 400, "-" + "9" * 400, "1e400", "1" * 5000, "9223372036854775808", "-9223372036854775809",
    "1e30", "1e15", "0.5", "1.5", "2.5e-9", "", " ", "abc", "∞", "１２", "🦙", "ñ", "\u202e8", "8\u200b",
    "1:2:log1000000000", "1:1e9:1000000000", "1:2:log99999999999999999999", "0:0", "1:0:log", "0:8:log", ":", "::",
    "1:2:3:4", "1,,2", ",", ",,,", "1:2:log-5", "1:2:0", "1:2:-3", "-5:5", "1e308:1e308", "nan:1", "1:inf",
    "8K", "8Ki", "1.5M", "2T", "1e-320:1", "3 TB/s", "1 XB", "$-1/h", "%s%n", "../../etc/passwd", "-", "--",
    "--help", "-x", "1 2", "0x10", "1_000", "1,000,000", "+5", ".5", "5.", "1e", "e5",
]
HOSTILE_TOML = ["true", "false", "-1", "0", "1e308", "-1e308", "nan", "inf", "-inf", "5e-324", "1e-320",
                "9223372036854775807", '"abc"', '""', '"1 XB"', "[]", "[1, 2]", '["a", 3]', "{}", '{ a = 1 }', "0.5",
                '"' + "x" * 5000 + '"', "1000000000", '"-3 TB/s"', '"nan TB/s"', '"1e400 GB"']
HOSTILE_JSON = [None, True, False, -1, 0, 1e308, -1e308, 5e-324, 10**18, 10**9, 2**63, "abc", "", [], [1, 2],
                ["a", 3], {}, {"a": 1}, 0.5, 1.5, "x" * 5000]

MODELS = ["llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "frontier-100b", "qwen3-235b-a22b", "gemma-2-9b",
          "mixtral-8x7b", "kimi-k2"]
HARDWARE = ["h100", "hgx-h100", "gb200-nvl72", "b200", "tpu-v5e", "mi300x", "h200"]
SHEETS = ["claude-opus-4.6", "gemini-3.1-pro", "gpt-5.1", "deepseek-v3.2"]
DTYPES = ["bf16", "fp8", "fp4", "int8", "mxfp4", "fp16", "nvfp4"]

# plausible values by option name (the option's own default is plausible too)
PLAUSIBLE = {
    "--hardware": HARDWARE, "-H": HARDWARE, "--systems": ["hgx-h100,gb200-nvl72", "h100"],
    "--weights-dtype": DTYPES, "--kv-dtype": DTYPES, "--dtype": DTYPES, "--act-dtype": DTYPES,
    "--compute-dtype": DTYPES,
    "--efficiency": ["ideal", "auto", "hopper-serving", "blackwell-serving"],
    "--model": MODELS, "-m": MODELS,
    "--batch": ["1", "8", "64", "1:256:log", "1,16,256", "4096"], "--context": ["0", "8192", "8K", "128Ki", "1M",
                                                                                  "1K:128K:log"],
    "--chips": ["1", "8", "16", "72", "64"], "--gpus": ["1", "8", "16", "72"],
    "--tokens": ["1T", "15T", "1e9"], "--isl": ["1000", "8K"], "--osl": ["100", "1K"],
    "--concurrency": ["1", "8", "64", "1,8,64"], "--schedule": ["1f1b", "gpipe", "interleaved"],
    "--law": ["chinchilla", "besiroglu"], "--method": ["s-base", "rl-r", "hash"],
    "--framework": ["trtllm", "vllm", "sglang"], "--weight-read": ["hit", "all"], "--tier": ["ddr", "flash", "disk"],
    "--arrivals": ["steady", "poisson", "waves", "closed-loop"], "--recv-interval": ["1", "10", "30"],
    "--recompute": ["none", "selective", "full"], "--optimizer": ["adam-mixed", "adam-fp32"],
    "--only": ["R1", "R5", "R1,R3"], "--kind": ["input", "output"], "--speedup": ["2.5", "1.5"],
    "--price": ["6", "2"], "--compute": ["1e24", "5.8e23"], "--params": ["70B", "1e9"],
}
ARGUMENT_VALUES = {"model": MODELS, "sheet": SHEETS, "name": MODELS + HARDWARE}
GENERIC = ["1", "2", "4", "8", "64", "0.5", "8192", "1K", "1,2,4", "1:64:log"]


class Chooser:
    """Where random choices come from."""

    def choice(self, seq):  # pragma: no cover - interface
        raise NotImplementedError

    def chance(self, p: float) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def integer(self, lo: int, hi: int) -> int:  # pragma: no cover - interface
        raise NotImplementedError


class RandomChooser(Chooser):
    def __init__(self, seed):
        self.r = random.Random(seed)

    def choice(self, seq):
        return seq[self.r.randrange(len(seq))]

    def chance(self, p):
        return self.r.random() < p

    def integer(self, lo, hi):
        return self.r.randint(lo, hi)


class HypothesisChooser(Chooser):
    def __init__(self, data):
        self.data = data

    def choice(self, seq):
        from hypothesis import strategies as st

        return self.data.draw(st.sampled_from(list(seq)))

    def chance(self, p):
        from hypothesis import strategies as st

        return self.data.draw(st.integers(0, 999)) < p * 1000

    def integer(self, lo, hi):
        from hypothesis import strategies as st

        return self.data.draw(st.integers(lo, hi))


# ----------------------------------------------------------------------------------- the CLI tree
@dataclass
class Param:
    name: str  # longest option name, or the argument's name
    opts: list
    kind: str  # "flag", "option", "argument"
    required: bool
    default: object
    is_path: bool
    choices: list = field(default_factory=list)


@dataclass
class Command:
    path: list
    params: list


# Commands that run until stopped by design (a server): fuzzed over HTTP by tests/test_web.py instead.
LONG_RUNNING = {("web",)}

# Known long-running computations (not hangs), by command path: runs with a flag of LONG_FLAGS, and every run of
# LONG_COMMANDS, may take LONG_TIMEOUT seconds. benchmarks/fuzz.py gives them that limit instead of its --timeout
# (timeout_for); the in-process CI slice (tests/test_fuzz.py, invocation(long_running=False)) leaves the LONG_FLAGS
# out to stay fast. FORCED_FLAGS are always given: `measure` without --quick is the full benchmark sweep of this
# machine (over 600 s on 2 CPU cores, 2026-11-25) and only differs from --quick in its sizes.
LONG_FLAGS = {("validate",): ("--cv", "--refit")}  # leave-one-group-out refits (minutes); a full refit (~30 s)
LONG_COMMANDS = {("measure",)}  # a benchmark of this machine: ~30-60 s even with --quick on 2 cores
FORCED_FLAGS = {("measure",): ("--quick",)}
LONG_TIMEOUT = {("validate",): 600, ("measure",): 180}


def command_tree() -> list[Command]:
    """Every leaf command of the app with its parameters, from the click tree (nothing hard-coded but the
    long-running servers in LONG_RUNNING)."""
    import click

    from rackmath.cli.main import command

    out = []
    stack = [([], command())]
    while stack:
        path, c = stack.pop()
        if isinstance(c, click.Group):
            for n, sub in sorted(c.commands.items()):
                if not getattr(sub, "hidden", False):
                    stack.append((path + [n], sub))
            continue
        if tuple(path) in LONG_RUNNING:
            continue
        params = []
        for p in c.params:
            if isinstance(p, click.Argument):
                kind = "argument"
            elif getattr(p, "is_flag", False):
                kind = "flag"
            else:
                kind = "option"
            opts = list(p.opts)
            name = max(opts, key=len) if kind != "argument" else (p.name or "arg")
            lname = name.lower()
            is_path = isinstance(p.type, click.Path) or any(
                o in ("--output", "-o", "--csv", "--plots", "--out") for o in opts) or "output" in lname
            choices = list(getattr(p.type, "choices", []) or [])
            params.append(Param(name, opts, kind, bool(p.required), p.default, is_path, choices))
        out.append(Command(path, params))
    return sorted(out, key=lambda c: c.path)


# ----------------------------------------------------------------------------------- files
def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(str(v))


def toml_entry(kind: str, entry: dict, raw: dict | None = None) -> str:
    """One [[kind]] table; ``raw`` maps keys to literal TOML text (hostile values tomllib must parse)."""
    lines = [f"[[{kind}]]"]
    for k, v in entry.items():
        lines.append(f"{json.dumps(str(k))} = {_toml_value(v)}")
    for k, text in (raw or {}).items():
        lines.append(f"{json.dumps(str(k))} = {text}")
    return "\n".join(lines) + "\n"


_SHIPPED: dict | None = None


def shipped_entries() -> dict:
    """{kind: [tables]} from the package's own catalog data (mutation seeds)."""
    global _SHIPPED
    if _SHIPPED is None:
        import rackmath.specs.catalog as cat

        out: dict = {}
        for f in sorted(cat.DATA_DIR.rglob("*.toml")):
            doc = tomllib.loads(f.read_text(encoding="utf-8"))
            for kind in cat.KINDS:
                for t in doc.get(kind, []) or []:
                    if isinstance(t, dict):
                        out.setdefault(kind, []).append(t)
        _SHIPPED = out
    return _SHIPPED


def mutated_catalog(ch: Chooser, directory: Path) -> str:
    """Write one mutated catalog file into ``directory``; returns a short description."""
    kinds = sorted(shipped_entries())
    kind = ch.choice(kinds)
    base = copy.deepcopy(ch.choice(shipped_entries()[kind]))
    key = "name" if "name" in base else "id"  # [[record]] tables have an id
    if key in base:
        base[key] = ch.choice([str(base[key]) + "-fz", base[key], "fz-" + str(ch.integer(0, 9))])
    raw: dict = {}
    what = ch.choice(["value", "value", "value", "unknown", "drop", "duplicate", "hijack", "huge", "nest",
                      "aliases", "sub"])
    keys = sorted(base)
    if what == "value":
        k = ch.choice(keys)
        base.pop(k)
        raw[k] = ch.choice(HOSTILE_TOML)
    elif what == "unknown":
        k = ch.choice(keys)
        raw[k[:-1] + "x" if len(k) > 1 else "zz"] = "1"
    elif what == "drop":
        base.pop(ch.choice(keys), None)
    elif what == "hijack":
        base["aliases"] = [ch.choice(MODELS + HARDWARE + SHEETS + ["ideal"])]
    elif what == "huge":
        for k in ("n_layers", "scaleup_size", "d_model", "vocab_size", "n_experts"):
            if k in base:
                base[k] = ch.choice([10**9, 10**18, 2**63 - 1, 0, -1])
    elif what == "nest":
        raw["notes" if kind == "model" else "description"] = "[" * 400 + "]" * 400
    elif what == "aliases":
        raw["aliases"] = ch.choice(['"abc"', "5", "[1]", '[""]', '["' + "a" * 500 + '"]'])
    elif what == "sub":
        for k in ("flops", "fast_mode", "component_dtypes", "sources", "memory_tiers", "tiers", "hf_config"):
            if k in base:
                v = base.pop(k)
                raw[k] = ch.choice(HOSTILE_TOML) if not isinstance(v, dict) or ch.chance(0.5) else \
                    _toml_value({**v, ch.choice(list(v) or ["x"]): ch.choice([True, -1.0, "abc", 1e308, [1]])})
                break
    text = toml_entry(kind, base, raw)
    if what == "duplicate":
        text = text + text
    (directory / "fuzz.toml").write_text(text, encoding="utf-8")
    return f"{kind}:{what}"


def mutated_hf_config(ch: Chooser, directory: Path) -> Path:
    """Write a mutated HuggingFace config.json; returns its path."""
    files = sorted(HF_DIR.glob("*.json"))
    base = json.loads(ch.choice(files).read_text()) if files else {"model_type": "llama"}
    target = base.get("text_config") if isinstance(base.get("text_config"), dict) and ch.chance(0.5) else base
    what = ch.choice(["value", "value", "drop", "text_config", "nest", "model_type", "none"])
    keys = sorted(target)
    if what == "value" and keys:
        target[ch.choice(keys)] = ch.choice(HOSTILE_JSON)
    elif what == "drop" and keys:
        target.pop(ch.choice(keys))
    elif what == "text_config":
        base["text_config"] = ch.choice([None, [], "abc", 5, {}, {"hidden_size": -1}])
    elif what == "model_type":
        base["model_type"] = ch.choice(["llama4", "gemma3", "glm4_moe", "qwen3_next", "mamba", None, 7, ""])
    p = directory / "config.json"
    if what == "nest":
        p.write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        p.write_text(json.dumps(base))
    return p


_RECORDS: list | None = None


def shipped_records() -> list:
    """The shipped [[record]] tables (mutation seeds for --records files)."""
    global _RECORDS
    if _RECORDS is None:
        from rackmath.specs.records import SHIPPED_DIR

        _RECORDS = [t for f in sorted(SHIPPED_DIR.glob("*.toml"))
                    for t in tomllib.loads(f.read_text(encoding="utf-8")).get("record", []) if isinstance(t, dict)]
    return _RECORDS


def mutated_records(ch: Chooser, directory: Path) -> Path:
    """A --records directory holding one mutated [[record]] file: a hostile value, a field dropped or unknown, a
    layout the model refuses (tp·pp > gpus, ep on a dense model), a duplicated id, deep nesting or bad bytes."""
    d = directory / "recs"
    d.mkdir(exist_ok=True)
    base = copy.deepcopy(ch.choice(shipped_records()))
    base["id"] = "fz-" + str(ch.integer(0, 9))
    raw: dict = {}
    what = ch.choice(["value", "value", "value", "field", "drop", "unknown", "layout", "layout", "duplicate", "nest",
                      "bytes", "ok"])
    if what == "value":
        k = ch.choice(["value", "gpus", "tp", "ep", "pp", "isl", "osl", "concurrency", "batch", "context", "model",
                       "hardware", "weights_dtype", "kv_dtype", "metric", "status", "mtp", "acceptance"])
        base.pop(k, None)
        raw[k] = ch.choice(HOSTILE_TOML + ["1e-320", "5e-324", "1e-12", "1e12", "1e13"])
    elif what == "field":
        base[ch.choice(sorted(base))] = ch.choice([True, -1, 0, "abc", 1e308, [1], {"a": 1}])
    elif what == "drop":
        base.pop(ch.choice(sorted(base)), None)
    elif what == "unknown":
        raw["gpuz"] = "8"
    elif what == "layout":
        base.update(ch.choice([{"gpus": 1, "tp": 3}, {"gpus": 8, "tp": 8, "pp": 4}, {"gpus": 4, "tp": 4, "ep": 4},
                               {"gpus": 1000000, "tp": 1}, {"gpus": 8, "tp": 8, "kv_shards": 3}]))
    elif what == "nest":
        raw["title"] = "[" * 400 + "]" * 400
    text = toml_entry("record", base, raw)
    if what == "duplicate":
        text += text
    f = d / "mine.toml"
    if what == "bytes":
        f.write_bytes(b"\xff\xfe" + text.encode())
    else:
        f.write_text(text, encoding="utf-8")
    return d


def mutated_trace(ch: Chooser, directory: Path) -> Path:
    """A --trace file: CSV or JSON lines with hostile rows (NaN, negatives, huge counts, missing columns, deep
    nesting, non-UTF-8 bytes, unsorted times, a header only)."""
    jsonl = ch.chance(0.5)
    rows = [(0.1 * i, 1000, 200) for i in range(ch.integer(1, 20))]
    what = ch.choice(["value", "value", "nest", "columns", "header", "bytes", "width", "ok"])
    bad = ch.choice(["nan", "-1", "0", "1e308", "1e-320", "abc", "", "inf", "1e30", "5.5", "[]", "{}", "null"])
    f = directory / ("trace.jsonl" if jsonl else "trace.csv")
    if jsonl:
        lines = [json.dumps({"arrival_s": a, "isl": i, "osl": o}) for a, i, o in rows]
        if what == "value":
            k = ch.choice(["arrival_s", "isl", "osl"])
            lines[-1] = lines[-1].replace(f'"{k}": ', f'"{k}": {bad if bad not in ("abc", "") else json.dumps(bad)}'
                                          + ", \"_x\": ", 1)
        elif what == "nest":
            lines.append('{"arrival_s": 1, "isl": ' + "[" * 100_000 + "]" * 100_000 + ', "osl": 1}')
        elif what == "columns":
            lines = [json.dumps({"t": a, "isl": i}) for a, i, _ in rows]
        elif what == "width":
            lines.append("[1, 2, 3]")
        text = "\n".join(lines) + "\n"
    else:
        lines = ["arrival_s,isl,osl"] + [f"{a},{i},{o}" for a, i, o in rows]
        if what == "value":
            j = ch.integer(0, 2)
            cells = lines[-1].split(",")
            cells[j] = bad
            lines[-1] = ",".join(cells)
        elif what == "columns":
            lines[0] = "time,prompt"
        elif what == "width":
            lines.append("1,2,3,4")
        elif what == "nest":
            lines.append('"' + "[" * 1000 + '",1,1')
        text = "\n".join(lines) + "\n"
    if what == "header":
        text = text.splitlines()[0] + "\n"
    if what == "bytes":
        f.write_bytes(b"\xff\xfe" + text.encode())
    else:
        f.write_text(text)
    return f


#: Options that read a user file: given a malformed one of their kind (80 % of the time they are drawn).
INPUT_FILES = {"--records": mutated_records, "--trace": mutated_trace}


# ----------------------------------------------------------------------------------- invocations
@dataclass
class Invocation:
    argv: list
    sentinels: list  # files that must be unchanged afterwards (no --force given)
    note: str = ""
    command: tuple = ()  # the command's path, e.g. ("model", "show")
    cwd: str | None = None  # run in this directory (figures written to '-' would land here as ./-.png)


def is_long(inv: Invocation) -> bool:
    """A known long-running computation (LONG_COMMANDS, LONG_FLAGS), not a hang."""
    cmd = tuple(inv.command)
    return cmd in LONG_COMMANDS or any(f in inv.argv for f in LONG_FLAGS.get(cmd, ()))


def timeout_for(inv: Invocation, default: float) -> float:
    """The time limit of one run: ``LONG_TIMEOUT`` for the known long-running computations, else ``default``."""
    return max(default, LONG_TIMEOUT[tuple(inv.command)]) if is_long(inv) else default


def _value(ch: Chooser, p: Param, hostile: float) -> str:
    if p.choices and ch.chance(0.7):
        return str(ch.choice(p.choices))
    if ch.chance(hostile):
        return ch.choice(HOSTILE)
    pool = []
    for o in p.opts:
        pool += PLAUSIBLE.get(o, [])
    if p.kind == "argument":
        pool += ARGUMENT_VALUES.get(p.name, [])
    if p.default not in (None, "", [], ()) and not isinstance(p.default, bool) and not callable(p.default):
        pool.append(str(p.default))
    return ch.choice(pool or GENERIC)


DASH_FILES = ("-", "-.png", "-.svg", "-.pdf", "-.csv", "-.toml")


def _path_value(ch: Chooser, tmp: Path, sentinels: list, force: bool) -> str:
    what = ch.choice(["new", "new", "existing", "existing", "dir", "full", "missing-dir", "empty", "under-file",
                      "stdout"])
    suffix = ch.choice([".png", ".csv", ".svg", ".pdf", ".txt", ""])
    if what == "new":
        return str(tmp / f"out{ch.integer(0, 99)}{suffix}")
    if what == "existing":
        f = tmp / f"mine{ch.integer(0, 99)}{suffix}"
        f.write_text(SENTINEL)
        if not force:
            sentinels.append(str(f))
        return str(f)
    if what == "dir":
        return str(tmp)
    if what == "full":
        return "/dev/full"
    if what == "missing-dir":
        return "/nonexistent-rackmath/x" + suffix
    if what == "under-file":
        f = tmp / "afile"
        f.write_text(SENTINEL)
        sentinels.append(str(f))
        return str(f / ("x" + suffix))
    if what == "stdout":  # '-' is stdout for text only; a figure library would write ./-.png (issue 36)
        for name in DASH_FILES:
            f = tmp / name
            if not f.exists():
                f.write_text(SENTINEL)
            if str(f) not in sentinels:
                sentinels.append(str(f))  # even with --force: the user asked for stdout, not this file
        return "-"
    return ""


def invocation(ch: Chooser, tree: list[Command], tmp: Path, hostile: float = 0.3,
               long_running: bool = True) -> Invocation:
    """One random command line: a command from the tree, its required parameters and a random subset of the rest,
    each value plausible or hostile; sometimes a mutated catalog, an HF config as the model, output paths.
    FORCED_FLAGS are always given; ``long_running=False`` leaves out the flags of LONG_FLAGS (the same draws are
    made, so a seed gives the same command line otherwise)."""
    cmd = ch.choice(tree)
    long_flags = () if long_running else LONG_FLAGS.get(tuple(cmd.path), ())
    forced = FORCED_FLAGS.get(tuple(cmd.path), ())
    argv: list = []
    sentinels: list = []
    note = ""
    if ch.chance(0.12):
        d = tmp / "cat"
        d.mkdir(exist_ok=True)
        note = "catalog " + mutated_catalog(ch, d)
        argv += ["--catalog", str(d)]
    argv += list(cmd.path)
    force = any(p.name == "--force" for p in cmd.params) and ch.chance(0.3)
    for p in cmd.params:
        if p.name == "--help":
            continue
        if p.kind == "flag":
            if p.name == "--force":
                if force:
                    argv.append("--force")
            elif (ch.chance(0.25) and p.name not in long_flags) or p.name in forced:
                argv.append(p.name)
            continue
        if not p.required and not ch.chance(0.35):
            continue
        if p.name in INPUT_FILES and ch.chance(0.8):
            v = str(INPUT_FILES[p.name](ch, tmp))
            note = (note + " " + p.name.lstrip("-")).strip()
        elif p.is_path:
            v = _path_value(ch, tmp, sentinels, force)
        elif p.kind == "argument" and p.name == "model" and ch.chance(0.15):
            v = str(mutated_hf_config(ch, tmp))
            note = (note + " hf").strip()
        else:
            v = _value(ch, p, hostile)
        if p.kind == "argument":
            argv.append(v)
        else:
            argv += [ch.choice(p.opts) if ch.chance(0.2) else p.name, v]
    return Invocation(argv, sentinels, note, tuple(cmd.path), str(tmp))


def file_invocation(ch: Chooser, tmp: Path) -> Invocation:
    """One run of a command that reads a malformed user file: a mutated catalog (list, show, use), a mutated
    HuggingFace config.json (show, roofline, serve), a mutated --records directory (validate), a mutated --trace
    (simulate). Exit 0 (the bad entry skipped with a warning, or harmless) or one ``error:`` line."""
    kind = ch.choice(["catalog", "catalog", "hf", "hf", "records", "records", "trace", "trace"])
    m, hw = ch.choice(MODELS[:3]), ch.choice(HARDWARE[:3])
    js = ["--json"] if ch.chance(0.5) else []
    if kind == "catalog":
        d = tmp / "cat"
        d.mkdir(exist_ok=True)
        note = "catalog " + mutated_catalog(ch, d)
        name = "fz-" + str(ch.integer(0, 9))
        cmd = ch.choice([["hardware", "list"], ["hardware", "list", "--systems"], ["model", "list"], ["price", "--list"],
                         ["model", "show", name], ["hardware", "show", name], ["roofline", m, "-H", hw] + js,
                         ["roofline", name, "-H", hw] + js, ["price", name] + js, ["cache"] + js])
        argv = ["--catalog", str(d)] + cmd
    elif kind == "hf":
        p = mutated_hf_config(ch, tmp)
        note = "hf"
        argv = ch.choice([["model", "show", str(p)] + js, ["roofline", str(p), "-H", hw] + js,
                          ["serve", str(p), "-H", hw, "--isl", "100", "--osl", "100", "-c", "8"] + js])
    elif kind == "records":
        d = mutated_records(ch, tmp)
        note = "records"
        argv = ["validate", "--records", str(d)] + (["--only-records"] if ch.chance(0.7) else []) + js
    else:
        f = mutated_trace(ch, tmp)
        note = "trace"
        argv = ["simulate", ch.choice(MODELS[:1]), "-H", "h100", "--trace", str(f)] + js
    cmd = tuple(a for a in argv if not a.startswith("-") and "/" not in a)[:2]
    return Invocation(argv, [], note, cmd if cmd[:1] != ("validate",) else ("validate",), str(tmp))


# ----------------------------------------------------------------------------------- web requests
WEB_HOSTILE_PATHS = ["/static/../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd", "/api/view/..%2f..%2fx",
                     "/api/pages/" + "x" * 5000, "/api/view/" + "%00", "/api/roofline?" + "a=1&" * 2000,
                     "/api/../../../etc/passwd", "/" + "🦙" * 100, "/api/models?x=" + "[" * 10000]


def web_request(ch: Chooser, routes: list, pages: list) -> tuple[str, dict, dict]:
    """One hostile GET: (url, params, headers). ``routes``: (path, [query parameter names]) of the app's GET routes;
    parameters plausible or hostile, sometimes unknown ones, a hostile Host header or a traversal path."""
    headers = {}
    if ch.chance(0.05):
        headers["host"] = ch.choice(["evil.example", "LOCALHOST", "localhost.", "", "a" * 300, "127.0.0.1:99999"])
    if ch.chance(0.06):
        return ch.choice(WEB_HOSTILE_PATHS), {}, headers
    path, names = ch.choice(routes)
    if "{page}" in path:
        path = path.replace("{page}", ch.choice(pages + ["nope", "..", "%2e%2e", "x" * 300]))
    params = {}
    for n in names:
        if not ch.chance(0.6):
            continue
        opt = "--" + n.replace("_", "-")
        pool = PLAUSIBLE.get(opt, []) + (MODELS if n == "model" else HARDWARE if n == "hardware" else
                                         SHEETS if n == "sheet" else [])
        params[n] = ch.choice(HOSTILE) if ch.chance(0.4) or not pool else ch.choice(pool)
    if ch.chance(0.1):
        params[ch.choice(["bogus", "batchh", "__proto__", "x" * 100])] = "1"
    return path, params, headers


def classify(code, err: str, sentinels: list, timed_out: bool = False, signal: int | None = None) -> str:
    """The outcome class of one run (see the module docstring)."""
    for f in sentinels:
        try:
            if Path(f).read_text() != SENTINEL:
                return "overwritten"
        except (OSError, UnicodeDecodeError):
            return "overwritten"
    if timed_out:
        return "hang"
    if signal is not None or "MemoryError" in err or "needs more memory" in err:
        return "oom"
    if "Traceback" in err or "internal error in rackmath" in err:
        return "traceback"
    if code == 0:
        return "ok"
    lines = [x for x in err.splitlines() if x.strip()]
    if code == 2 and len(lines) == 1 and lines[0].startswith("error: "):
        return "clean"
    return "traceback"


def nonfinite_json(out: str) -> bool:
    """Whether a JSON output holds NaN or ±Infinity (JSON has neither: rackmath writes null). Outputs that are not
    JSON (tables, CSV) are False."""
    text = out.lstrip()
    if not text.startswith(("{", "[")):
        return False
    seen = []

    def constant(name):
        seen.append(name)
        return None

    try:
        json.loads(text, parse_constant=constant)
    except ValueError:
        return False  # not (only) JSON: e.g. a table that starts with '['
    return bool(seen)


def is_help(argv) -> bool:
    return "--help" in argv
