"""Every command README.md shows runs on this checkout (issue 10 item 10), so the README never lies again.

Commands are taken from the ```sh blocks (joined across backslash continuations, comments stripped; in a `&&`
chain only the `rackmath …` parts run: installing and the test suite itself are .ci/run's job), each run in-process
as `python -m rackmath` would (same entry point) in a fresh temporary directory. ```python blocks are executed.
Paths into ../shared are replaced by the copies shipped in the package. Heavy commands are marked slow (they still
run in CI).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import MODEL_CONFIGS, REPO, run_cli

README = REPO / "README.md"
HEAVY = ("lecture", "validate --cv")  # a few seconds each: still run, marked slow
SERVERS = ("web",)  # run until stopped: checked with --help (the command and its options exist)


def _blocks(lang: str) -> list[str]:
    return re.findall(r"```" + lang + r"\n(.*?)```", README.read_text(), re.S)


def _strip_comment(line: str) -> str:
    """Drop a trailing '# comment' outside quotes."""
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).rstrip()


def readme_commands() -> list[str]:
    cmds = []
    for block in _blocks("sh"):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = _strip_comment(line).strip()
            if not line:
                continue
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("rackmath ") or part == "rackmath":
                    cmds.append(part)
    return cmds


def _local(arg: str) -> str:
    """../shared/model-configs/X.json -> the shipped copy (the README should use hf:…, but never fail on it)."""
    m = re.search(r"(?:\.\./)?shared/model-configs/(.+\.json)$", arg)
    return str(MODEL_CONFIGS / m.group(1)) if m else arg


COMMANDS = readme_commands()


def test_readme_has_commands():
    assert len(COMMANDS) >= 15
    assert COMMANDS[0] == "rackmath lecture --plots lecture-plots"  # the set-up line's main job


@pytest.mark.parametrize("cmd", [pytest.param(c, marks=pytest.mark.slow) if c.split()[1:3] and
                                 any(" ".join(c.split()[1:]).startswith(h) for h in HEAVY) else c
                                 for c in COMMANDS])
def test_readme_command_runs(cmd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [_local(a) for a in shlex.split(cmd)[1:]]
    if argv and argv[0] in SERVERS:
        argv.append("--help")
    code, out, err = run_cli(*argv, env={"COLUMNS": "100"})
    assert code == 0, f"`{cmd}` exited {code}: {err}"
    assert out.strip() or err.startswith("wrote "), f"`{cmd}` printed nothing"
    assert "Traceback" not in err


@pytest.mark.parametrize("i", range(len(_blocks("python"))))
def test_readme_python_runs(i, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = _blocks("python")[i]
    exec(compile(code, f"README.md python block {i}", "exec"), {"__name__": "__readme__"})


def test_readme_numbers_it_promises():
    """The figures the README's comments name: the scaling book's 17 ms step; the ideal label by default."""
    code, out, _ = run_cli("roofline", "llama-3.1-70b", "-H", "tpu-v5e", "--gpus", "8", "--batch", "32",
                           "--context", "8Ki", "--weights-dtype", "int8", "--kv-dtype", "int8", "--json")
    import json

    d = json.loads(out)
    assert code == 0 and 15e-3 < d["step_s"] < 19e-3 and d["prediction"] == "ideal"
