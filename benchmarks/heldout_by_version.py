"""Each listed stack version's out-of-sample error on its InferenceMAX runs, for the label of the measured path.

    python benchmarks/stack_fit.py --logo-only --dump logo.json        # one group out, every run (about 3.5 min)
    python benchmarks/heldout_by_version.py logo.json                  # prints the table
    python benchmarks/heldout_by_version.py logo.json --write          # specs/data/launch/stack_heldout.toml

The dump holds every InferenceMAX record's prediction with its run's group (model × chip × framework) left out of
the fit — the group's versions refitted without it, its chips' inferred silicon too (``stack_folds``). Per stack
version this writes the median |predicted / measured − 1| over its records of all four metrics (output tok/s/GPU,
TPOT, mean and median TTFT) and their count: the band ``serve`` prints for a deployment on that version's measured
path (``engine.efficiency.for_stack``), as a preset's header prints the median of its records held out by source.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from rackmath.analyses.fitting import stack as S
from rackmath.analyses.fitting.validation import records
from rackmath.specs.stacks import HELDOUT
from stack_fit import inferencemax  # which records are the InferenceMAX runs (benchmarks/ is on sys.path)

HEADER = """\
# Each listed stack version's out-of-sample error on its InferenceMAX runs: every record of the version predicted
# with its run's group (model x chip x framework) left out of the fit (benchmarks/stack_fit.py --logo-only --dump),
# the median |predicted / measured - 1| over its records of all four metrics (output tok/s/GPU, TPOT, mean and
# median TTFT). Written by `python benchmarks/heldout_by_version.py DUMP --write`; read by
# engine.efficiency.for_stack, whose result's label prints it. Keys starting with "_" are not catalog kinds.
"""


def by_version(dump: dict, recs) -> dict:
    """{version: (median |error|, records)} of the records of ``recs`` the dump predicts (``one_group_out``)."""
    errs = {}
    for r in recs:
        if r.id in dump:
            errs.setdefault(S.version_of(r), []).append(dump[r.id]["one_group_out"] / r.value - 1.0)
    return {v: (float(np.median(np.abs(e))), len(e)) for v, e in sorted(errs.items())}


def toml_text(table: dict) -> str:
    out = [HEADER]
    for v, (err, n) in table.items():
        out += ["[[_stack_heldout]]", f'stack_version = "{v}"', f"heldout_error = {err:.4g}", f"records = {n}",
                f'source = "benchmarks/stack_fit.py --logo-only --dump, then benchmarks/heldout_by_version.py: the {n} '
                f'InferenceMAX records of {v}, each with its run\'s group left out"', ""]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="the JSON of benchmarks/stack_fit.py --logo-only --dump")
    ap.add_argument("--write", action="store_true", help=f"write {HELDOUT.relative_to(HELDOUT.parents[4])}")
    a = ap.parse_args(argv)
    try:
        dump = json.loads(Path(a.dump).read_text())
        if not isinstance(dump, dict) or not all(isinstance(v, dict) and "one_group_out" in v for v in dump.values()):
            raise ValueError("not a one-group-out dump")
    except (OSError, ValueError) as exc:
        print(f"error: dump: {a.dump}: {exc} (accepted: the JSON of benchmarks/stack_fit.py --dump)", file=sys.stderr)
        return 2
    table = by_version(dump, inferencemax(records()))
    for v, (err, n) in table.items():
        print(f"  {v:40s} {n:4d} records  median |error| {err * 100:5.1f}%")
    if a.write:
        HELDOUT.write_text(toml_text(table))
        print(f"wrote {HELDOUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
