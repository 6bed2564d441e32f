"""How well the citation check (ragweedd/answer/verify.py) tells wrong citations from right ones.

    python benchmarks/citations.py [--min-support 0.6] [--data tests/data/citations.json]

The labelled set (tests/data/citations.json): six short sources and claims citing them, each
either correct or deliberately wrong in one of three ways -- a wrong number, a wrong source (a true
claim citing another source, alone or as the second of two), a swapped entity (a name from another
source put in). A wrong claim counts as caught when its wrong citation (the last of the claim) is
flagged unsupported; a correct claim is wrongly flagged when any of its citations is. Prints one
row per kind and writes benchmarks/results/citations.json; with several --min-support values, one
block each.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import table, write_json  # noqa: E402
from ragweedd.answer.verify import verify  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "citations.json"


def measure(data: dict, min_support: float) -> tuple[list[dict], list[dict]]:
    rows: dict[str, dict] = {}
    misses: list[dict] = []
    for c in data["claims"]:
        checks = verify(c["answer"], data["sources"], min_support=min_support)
        if c["kind"] == "correct":
            flag = any(not x["supported"] for x in checks)
            wrong = flag
        else:
            flag = bool(checks) and not checks[-1]["supported"]
            wrong = not flag
        r = rows.setdefault(c["kind"], {"kind": c["kind"], "claims": 0, "flagged": 0})
        r["claims"] += 1
        r["flagged"] += int(flag)
        if wrong:
            misses.append({"kind": c["kind"], "answer": c["answer"],
                           "checks": [{k: x[k] for k in ("n", "supported", "score", "missing")} for x in checks]})
    for r in rows.values():
        r["rate"] = r["flagged"] / r["claims"]
        r["reads_as"] = "false flags" if r["kind"] == "correct" else "caught"
    wrong = [r for k, r in rows.items() if k != "correct"]
    total = {"kind": "all wrong", "claims": sum(r["claims"] for r in wrong),
             "flagged": sum(r["flagged"] for r in wrong), "reads_as": "caught"}
    total["rate"] = total["flagged"] / total["claims"]
    return [rows["correct"], *wrong, total], misses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-support", type=float, nargs="+", default=[0.6])
    ap.add_argument("--data", type=Path, default=DATA)
    a = ap.parse_args()
    data = json.loads(a.data.read_text(encoding="utf-8"))
    out = []
    for ms in a.min_support:
        rows, misses = measure(data, ms)
        print(f"\nmin_support = {ms}")
        print(table(rows, ["kind", "claims", "flagged", "rate", "reads_as"]))
        for m in misses:
            print(f"  not as labelled ({m['kind']}): {m['answer']}  {m['checks']}")
        out.append({"min_support": ms, "rows": rows, "not_as_labelled": misses})
    p = write_json("citations", {"data": str(a.data), "runs": out})
    print(f"\nwrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
