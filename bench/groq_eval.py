"""Benchmark of kinflow.groq (and, where Node.js is available, groq-js on the same work).

Workloads: (a) the engine's hot condition over 1,000 and 10,000 ``$subworkflows`` rows,
(b) a filter with a projection over 10,000 documents, (c) parsing every query of the
conformance suite. Prints evaluations (or parses) per second and kinflow/groq-js ratios.
groq-js is installed with npm into ``bench/.groqjs/`` (git-ignored) on first use.

Usage: ``.venv/bin/python bench/groq_eval.py [--seconds 2] [--no-groqjs]``
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kinflow.groq import evaluate, parse  # noqa: E402
from kinflow.groq.parser import parse_query  # noqa: E402
from tests.conformance.suite import Suite, suite_dir  # noqa: E402

GROQJS_DIR = ROOT / "bench" / ".groqjs"
GROQJS_VERSION = "1.30.3"

CONDITION = "count($subworkflows[activity == 'translate' && current && status == 'active']) == 0"
PROJECTION = ('*[_type == "article" && views > 500 && !(status in ["draft", "deleted"])]'
              '{_id, title, "author": author._ref, "tags": count(tags), slug}')


def make_rows(n: int, rng: random.Random) -> list[dict[str, Any]]:
    acts = ["translate", "review", "publish", "index"]
    stats = ["active", "done", "failed", "waiting"]
    return [{"_id": f"sw{i}", "activity": rng.choice(acts), "current": rng.random() < 0.5,
             "status": rng.choice(stats), "locale": f"l{i % 30}"} for i in range(n)]


def make_docs(n: int, rng: random.Random) -> list[dict[str, Any]]:
    docs = []
    for i in range(n):
        docs.append({
            "_id": f"doc{i:06d}", "_type": rng.choice(["article", "person", "tag"]),
            "title": f"Title {i}", "views": rng.randint(0, 1000),
            "status": rng.choice(["draft", "published", "deleted", "review"]),
            "author": {"_ref": f"doc{rng.randrange(n):06d}"},
            "tags": [f"t{rng.randrange(50)}" for _ in range(rng.randrange(5))],
            "slug": {"current": f"slug-{i}"},
        })
    return docs


def rate(fn: Callable[[], object], seconds: float, per_call: int = 1) -> float:
    """Calls per second of ``fn`` (times ``per_call``), after one warm-up call."""
    fn()
    count = 0
    start = time.perf_counter()
    while True:
        fn()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return count * per_call / elapsed


def suite_queries() -> list[str]:
    root = suite_dir()
    if root is None:
        return [CONDITION, PROJECTION]
    return sorted({c.query for c in Suite(root).cases})


def kinflow_rates(work: dict[str, Any], seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    cond = parse(CONDITION)
    for n in (1000, 10000):
        params = {"subworkflows": work[f"rows{n}"]}
        out[f"a{n}"] = rate(lambda p=params: evaluate(cond, params=p), seconds)  # type: ignore[misc]
    proj = parse(PROJECTION)
    docs = work["docs"]
    out["b"] = rate(lambda: evaluate(proj, dataset=docs), seconds)
    queries = work["queries"]

    def parse_all() -> None:
        for q in queries:
            try:
                parse_query(q, None)
            except Exception:  # invalid suite queries are part of the load
                pass

    out["c"] = rate(parse_all, seconds, per_call=len(queries))
    return out


GROQJS_SCRIPT = r"""
const {parse, evaluate} = require('groq-js');
const fs = require('fs');
const work = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const seconds = Number(process.argv[3]);
async function rate(fn, perCall = 1) {
  await fn();
  let count = 0;
  const start = process.hrtime.bigint();
  for (;;) {
    await fn();
    count++;
    const el = Number(process.hrtime.bigint() - start) / 1e9;
    if (el >= seconds) return count * perCall / el;
  }
}
(async () => {
  const out = {};
  const cond = parse(work.condition);
  for (const n of [1000, 10000]) {
    const params = {subworkflows: work['rows' + n]};
    out['a' + n] = await rate(async () => (await evaluate(cond, {params})).get());
  }
  const proj = parse(work.projection);
  const dataset = work.docs;
  out.b = await rate(async () => (await evaluate(proj, {dataset})).get());
  out.c = await rate(async () => {
    for (const q of work.queries) { try { parse(q); } catch (e) {} }
  }, work.queries.length);
  console.log(JSON.stringify(out));
})();
"""


def groqjs_rates(work: dict[str, Any], seconds: float) -> dict[str, float] | None:
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        return None
    GROQJS_DIR.mkdir(parents=True, exist_ok=True)
    if not (GROQJS_DIR / "node_modules" / "groq-js").is_dir():
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent",
                        f"groq-js@{GROQJS_VERSION}"], cwd=GROQJS_DIR, check=True)
    script = GROQJS_DIR / "bench.js"
    script.write_text(GROQJS_SCRIPT)
    data = GROQJS_DIR / "work.json"
    data.write_text(json.dumps({**work, "condition": CONDITION, "projection": PROJECTION}))
    res = subprocess.run([node, str(script), str(data), str(seconds)], cwd=GROQJS_DIR,
                         check=True, capture_output=True, text=True)
    rates: dict[str, float] = json.loads(res.stdout.strip().splitlines()[-1])
    return rates


LABELS = {
    "a1000": "(a) hot condition, 1,000 rows (evals/s)",
    "a10000": "(a) hot condition, 10,000 rows (evals/s)",
    "b": "(b) filter + projection, 10,000 docs (evals/s)",
    "c": "(c) parse suite queries (queries/s)",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--no-groqjs", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)
    work: dict[str, Any] = {"rows1000": make_rows(1000, rng), "rows10000": make_rows(10000, rng),
            "docs": make_docs(10000, rng), "queries": suite_queries()}
    ours = kinflow_rates(work, args.seconds)
    theirs = None if args.no_groqjs else groqjs_rates(work, args.seconds)
    print(f"{'workload':50} {'kinflow':>12} {'groq-js':>12} {'ratio':>7}")
    for key, label in LABELS.items():
        js = f"{theirs[key]:12,.0f}" if theirs else f"{'n/a':>12}"
        ratio = f"{ours[key] / theirs[key]:7.2f}" if theirs else f"{'':>7}"
        print(f"{label:50} {ours[key]:12,.0f} {js} {ratio}")
    print(f"(suite queries parsed per round: {len(work['queries'])}; ratio = kinflow/groq-js)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
