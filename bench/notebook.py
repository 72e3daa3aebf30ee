"""A notebook's slider move against replaying every policy: what ``notebooks/whatif.ipynb`` answers.

Each move of the whatif notebook's sliders calls :meth:`analytics.notebook.WhatIf.answer`, which
replays only the policies the moved value changes (:func:`analytics.whatif.reuse.compare_reusing`)
for every service of the pool. The floor it is compared with, in the same run: the same answer
with every policy of every service replayed (:func:`analytics.whatif.answer.answer_for`, as
``tidelens whatif`` answers). The issue's target: each move under 0.5 s.

With ``--screenshot``, the postmortem notebook is run by papermill on the store and opened in a
real JupyterLab in Chromium: ``docs/screenshots/notebook-postmortem.png``.

With ``--agree``, the one story on the store: the notebook's answer and longest event beside the
What-if page's and Chargeback's (AppTest) and ``tidelens whatif/review/events --json``'s.

    .venv/bin/python bench/notebook.py --agree              # the bundled sample (21 days)
    .venv/bin/python bench/notebook.py --db data/mine.duckdb --screenshot
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/ holds a requests.py of its own: this folder off the path, or `import requests` finds it
sys.path = [str(ROOT), str(ROOT / "tests")] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from apptest_helpers import metric, open_store_link, shown  # noqa: E402

from analytics.notebook import open_store, with_restore_min  # noqa: E402
from analytics.times import parse_time_ms  # noqa: E402
from analytics.whatif import compare  # noqa: E402
from analytics.whatif.answer import ServiceReplay, answer_for, pool_answer  # noqa: E402
from analytics.whatif.form import apply as apply_edits  # noqa: E402
from analytics.whatif.transforms import Transforms, apply_transforms  # noqa: E402

# The moves a person makes: each slider, one step at a time, then back.
MOVES = [{"reservation_gpus": r} for r in (8, 12, 16, 20, 24)] + \
        [{"restore_min": m} for m in (5.0, 15.0, 30.0)] + \
        [{"traffic_growth": g} for g in (1.1, 1.2, 1.5)] + [{}]


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="store (default data/tidelens.duckdb, else the bundled sample)")
    ap.add_argument("--screenshot", action="store_true", help="also write docs/screenshots/notebook-postmortem.png")
    ap.add_argument("--agree", action="store_true",
                    help="also check that the notebook's answer and longest event are the What-if page's, "
                         "Chargeback's, `tidelens whatif/review/events --json`'s on this store (exit 1 if not)")
    args = ap.parse_args()

    lens = open_store(args.db)
    took, whatif = _timed(lambda: lens.whatif())
    print(f"store {lens.path}: services {', '.join(whatif.pool.calibrations)}; calibration {took:.1f} s "
          "(once per store content: the result cache keeps it)")
    first, _ = _timed(whatif.answer)
    moves, floors = [], []
    for move in MOVES:
        t, answer = _timed(lambda: whatif.answer(**move))
        moves.append(t)
        floors.append(_floor(whatif, move))
        print(f"  {str(move or 'back to the start'):<28} {t:6.3f} s  (every policy replayed: {floors[-1]:6.3f} s)"
              f"  best {answer.best_policy}")
    print(f"first answer {first:.3f} s; a move: median {statistics.median(moves):.3f} s, worst {max(moves):.3f} s "
          f"(target 0.5 s: {'met' if max(moves) < 0.5 else 'MISSED'}); every policy replayed: median "
          f"{statistics.median(floors):.3f} s; ratio {statistics.median(moves) / statistics.median(floors):.2f}")
    if args.screenshot:
        _screenshot(lens.path)
    return 0 if not args.agree or _agree(lens) else 1


def _agree(lens) -> bool:
    """The one story on this store: the notebook's answer (best policy, minutes, payer, sentence)
    and its longest event against the CLI's JSON and the What-if and Chargeback pages (AppTest)."""
    def cli(*argv: str) -> object:
        done = subprocess.run([sys.executable, "-m", "analytics", *argv, "--db", str(lens.path), "--json"],
                              capture_output=True, text=True, check=True, cwd=ROOT)
        return json.loads(done.stdout)

    mine = lens.whatif().answer().as_dict()
    said = {"tidelens whatif --json": cli("whatif")["pool"], "tidelens review --json": cli("review")["whatif"]["pool"]}
    for page in ("pages/whatif.py", "pages/chargeback.py"):
        at = open_store_link(lens.path, page, w_src="store")
        sentence = [shown(s.value) for s in at.success if s.value.startswith("Best policy for pool")]
        said[page] = {"sentence": sentence[0] if sentence else None,
                      "best_policy": metric(at, "Best policy, pool 'default'") if page.endswith("whatif.py") else None}
    ok = True
    for where, theirs in said.items():
        keys = [k for k in ("best_policy", "sentence", "violation_minutes", "payer", "payer_cost") if theirs.get(k) is not None]
        same = all(theirs[k] == mine[k] for k in keys)
        ok &= same
        print(f"  {where}: {'the same' if same else 'DIFFERENT'} ({', '.join(keys)})")
    events = cli("events")
    longest = max(events, key=lambda e: (parse_time_ms(e["end"]) - parse_time_ms(e["start"]), e["peak_p99_ms"]))
    ev = lens.event()
    same = (ev.id, ev.cause, ev.shares) == (longest["id"], longest["cause"], longest["shares"])
    ok &= same
    print(f"  tidelens events --json's longest event: {'the same' if same else 'DIFFERENT'} ({ev.id}, {ev.cause})")
    print(f"one story: {'yes' if ok else 'NO'} (best policy {mine['best_policy']}, {mine['violation_minutes']:,.0f} "
          f"minutes where the shared pool has {mine['shared_violation_minutes']:,.0f}; {mine['payer']} pays "
          f"${mine['payer_cost']:,.0f})")
    return ok


def _floor(whatif, move: dict) -> float:
    """The same move answered with every policy of every service replayed (no reuse)."""
    if "restore_min" in move:  # not a page edit: the notebook's own, every policy replayed
        def answer():
            scns = {n: with_restore_min(s, move["restore_min"]) for n, s in whatif.bases().items()}
            return pool_answer([ServiceReplay(n, s, compare(s)) for n, s in scns.items()])
        return _timed(answer)[0]
    grown = Transforms(traffic_growth=move.get("traffic_growth", 1.0))
    edits = {"pool.reservation_gpus": move["reservation_gpus"]} if "reservation_gpus" in move else {}
    edited = apply_transforms(apply_edits(whatif.bases()[whatif.service], edits), grown)
    return _timed(lambda: answer_for(whatif.pool, days=whatif.days, edited=whatif.service, scenario=edited,
                                     transforms=grown))[0]


def _screenshot(db: Path) -> None:
    from playwright.sync_api import sync_playwright
    from test_browser import CHROMIUM, CHROMIUM_ARGS
    from test_notebooks import cited, jupyterlab, open_in_jupyterlab, run_notebook

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "lab"
        folder.mkdir()
        done = run_notebook("postmortem", folder, db=str(db))
        event = cited(done)["event"]
        shot = ROOT / "docs" / "screenshots" / "notebook-postmortem.png"
        with jupyterlab(folder, Path(tmp)) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            open_in_jupyterlab(page, base, "postmortem.ipynb", event)
            news = page.get_by_role("button", name="No")  # JupyterLab's "notified about news?" toast
            if news.count():
                news.first.click()
            # the event's own card at the top of the screen: its sentence, cause and shares, the figure below
            page.locator(".jp-OutputArea-output h4", has_text=f"Tail event {event}").first.evaluate(
                "e => e.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(shot))
            browser.close()
        print(f"wrote {shot}")


if __name__ == "__main__":
    sys.exit(main())
