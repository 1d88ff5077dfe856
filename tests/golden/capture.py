"""Golden `--json` outputs: the fixed set of commands whose numbers a refactoring must not move (issue 33).

``python tests/golden/capture.py`` runs every command in ``COMMANDS`` in-process and writes its JSON to
``tests/golden/<name>.json`` (the one command to refresh after an intended change). ``tests/test_golden.py``
re-runs them and compares numbers at a relative tolerance of 1e-9 (TTFT fields of plan/simulate/compare exempt:
they change on purpose when the serving model's TTFT becomes the one ``serve`` prints).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> argv (without the program name). Keep it small: the test re-runs all of them.
COMMANDS: dict[str, list[str]] = {
    "validate": ["validate", "--json"],
    "serve_llama70b_h100_c64": "serve llama-3.1-70b -H hgx-h100 --gpus 8 --isl 1000 --osl 1000 -c 64 --json".split(),
    "serve_llama70b_h100_c64_ideal": "serve llama-3.1-70b -H hgx-h100 --gpus 8 --isl 1000 --osl 1000 -c 64 --ideal --json".split(),
    "serve_dsv3_gb200_c256": "serve deepseek-v3 -H gb200-nvl72 --isl 1K --osl 1K --concurrency 256 --json".split(),
    "serve_dsv3_h200_sglang_waves": "serve deepseek-v3 -H hgx-h200 --gpus 8 --isl 3200 --osl 800 -c 8 --framework sglang --arrivals waves --json".split(),
    "serve_llama8b_vllm_eager": "serve llama-3.1-8b -H hgx-h100 --gpus 1 --isl 512 --osl 128 -c 8 --framework vllm --eager --json".split(),
    "serve_dsv3_h200_mtp": "serve deepseek-v3 -H hgx-h200 --gpus 8 --isl 1K --osl 1K -c 64 --mtp 1 --json".split(),
    "roofline_dsv3_gb200_ideal": "roofline deepseek-v3 --hardware gb200-nvl72 --batch 1,64,4096 --context 8K --json".split(),
    "roofline_dsv3_gb200_auto": "roofline deepseek-v3 -H gb200-nvl72 --batch 1,64,4096 --context 8K --efficiency auto --json".split(),
    "roofline_llama70b_v5e_int8": "roofline llama-3.1-70b -H tpu-v5e --gpus 8 --batch 32 --context 8Ki --weights-dtype int8 --kv-dtype int8 --json".split(),
    "roofline_llama70b_h100_energy": "roofline llama-3.1-70b -H hgx-h100 --batch 64 --pue 1.1 --usd-per-kwh 0.12 --power-cap 400 --json".split(),
    "plan_llama70b_rate10": "plan llama-3.1-70b --isl 1K --osl 1K --rate 10 --tpot 50ms -H h100,b200 --json".split(),
    "plan_llama70b_h100_users64": "plan llama-3.1-70b -H h100 --isl 1000 --osl 1000 --users 64 --json".split(),
    "simulate_llama70b_h100_c64": "simulate llama-3.1-70b -H h100 --gpus 8 -c 64 --requests 500 --isl 1000 --osl 1000 --json".split(),
    "compare_llama70b": "compare llama-3.1-70b -H h100,b200,mi355x --tok-s-user 50 --json".split(),
    "train_llama70b_10k": "train llama-3.1-70b -H hgx-h100 --gpus 10000 --tokens 15T --json".split(),
}


def run(argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from rackmath.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def portable(obj: object, root: str) -> object:
    """``obj`` with the package's absolute path (``root``) written as ``<rackmath>``: the records' ``file`` fields
    must compare equal from any checkout (CI runs a fresh clone in another folder)."""
    if isinstance(obj, str):
        return obj.replace(root, "<rackmath>")
    if isinstance(obj, list):
        return [portable(v, root) for v in obj]
    if isinstance(obj, dict):
        return {k: portable(v, root) for k, v in obj.items()}
    return obj


def capture(name: str) -> object:
    import rackmath

    code, out, err = run(COMMANDS[name])
    if code != 0:
        raise RuntimeError(f"{name}: exit {code}: {err.strip()}")
    return portable(json.loads(out), str(Path(rackmath.__file__).resolve().parent))


def main() -> None:
    names = sys.argv[1:] or list(COMMANDS)
    for name in names:
        data = capture(name)
        path = HERE / f"{name}.json"
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.relative_to(HERE.parents[1])}")


if __name__ == "__main__":
    main()
