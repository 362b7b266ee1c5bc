"""The node library's examples run headless from the repository, offline, as
a new user would run them: `switchboard run FLOW --timeout S`."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "resources" / "examples"
CHROMIUM = Path(os.environ.get("SWITCHBOARD_CHROMIUM", "/usr/bin/chromium"))
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(),
                                    reason=f"no Chromium at {CHROMIUM}: apt install chromium "
                                           "(CI does)")


def run_example(name: str, data_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWITCHBOARD_DATA_DIR": str(data_dir)}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(EXAMPLES / name),
                           *extra], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)


def debug_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@needs_chromium
def test_the_price_scraper_writes_every_product_of_both_pages_to_csv(tmp_path):
    r = run_example("price-scraper.flow.json", tmp_path, "--timeout", "60")
    assert r.returncode == 0, r.stderr
    assert debug_lines(r.stdout) == [{"node": "done", "name": "Saved", "value": 7}]
    with open(tmp_path / "files" / "northwind-prices.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["product"] for r in rows][:2] == ["Desk lamp", "Ergonomic chair"]
    assert rows[-1] == {"product": "Label printer", "price_eur": "99.9", "stock": "3 left"}


@needs_chromium
def test_the_shop_assistant_answers_from_pages_notes_and_the_stock_service(tmp_path):
    # The flow serves its own stock webhook, so it runs until its timeout
    # (exit 0: nothing is left in flight once the agent has answered).
    r = run_example("shop-assistant.flow.json", tmp_path, "--timeout", "8")
    assert r.returncode == 0, r.stderr
    out = {line["node"]: line["value"] for line in debug_lines(r.stdout)}
    assert "within 30 days of delivery" in out["answer"]
    assert '"in_stock": 12' in out["answer"]
    calls = {c["tool"]: c for c in out["calls"]}
    assert set(calls) == {"browser_goto", "browser_text", "read_file", "http_request"}
    assert all(c["status"] == "success" for c in calls.values()), calls
    assert "Grete" in calls["read_file"]["data"]["content"]


def test_the_invoice_clerk_asks_approval_for_large_invoices_and_mails_the_approver(tmp_path):
    # Its file trigger and webhook serve until the timeout; the workbooks in
    # invoices/ are there at start, so each is worked through at once.
    r = run_example("invoice-clerk.flow.json", tmp_path, "--timeout", "6")
    assert r.returncode == 0, r.stderr
    seen = {(line["node"], line["value"]) for line in debug_lines(r.stdout)}
    assert seen == {("auto", "INV-4611"), ("auto", "INV-4613"), ("auto", "INV-4702"),
                    ("asked", "INV-4612"), ("asked", "INV-4701")}
    mails = sorted((tmp_path / "outbox").glob("*.eml"))
    assert len(mails) == 2
    texts = "\n".join(m.read_text(encoding="utf-8") for m in mails)
    assert "To: approver@northwind.example" in texts
    assert "ticket APR-4612" in texts and "ticket APR-4701" in texts
    assert "Fjord Furniture is 2450 EUR" in texts


def test_the_site_crawl_answers_at_once_then_reports_with_progress_and_tokens(tmp_path):
    """Issue 14's example: the crawl runs in the background, the agent's
    first answer reaches the user before the crawl has read every page,
    the report follows, and the run counts its tokens (offline: no cost)."""
    events = tmp_path / "events.jsonl"
    r = run_example("site-crawl.flow.json", tmp_path, "--events", str(events),
                    "--timeout", "60")
    assert r.returncode == 0, r.stderr
    answers = [line["value"] for line in debug_lines(r.stdout)]
    assert len(answers) == 2
    assert "started reading the shop's website" in answers[0]
    assert "Two-slot toaster" in answers[1] and "Burr coffee grinder" in answers[1]
    seen = [json.loads(line) for line in events.read_text().splitlines()]
    kinds = [(e["type"], e.get("text", "")) for e in seen]
    first_answer = next(i for i, e in enumerate(seen) if e["type"] == "debug")
    # The user had the first answer while pages were still to be read.
    assert any(k == "tool.status" and t.startswith("page ") for k, t in kinds[first_answer:])
    assert any(e["type"] == "llm.delta" for e in seen[:first_answer])  # it streamed
    [crawl] = [e for e in seen if e["type"] == "tool.result"]
    assert crawl["status"] == "success" and crawl["tracking_id"]
    assert len(crawl["data"]["pages"]) == 7
    [finished] = [e for e in seen if e["type"] == "run.finished"]
    # Its scripted model is offline: 3,320 tokens in, 128 out, and no cost.
    assert finished["usage"]["input_tokens"] == 3320 and finished["usage"]["output_tokens"] == 128
    assert finished["cost_usd"] is None


def test_the_hooks_example_vetoes_the_outside_recipient_and_logs_every_call(tmp_path):
    r = run_example("hooks-audit.flow.json", tmp_path, "--timeout", "60")
    assert r.returncode == 0, r.stderr
    [answer] = debug_lines(r.stdout)
    assert "the copy to eve@elsewhere.org was not allowed" in answer["value"]
    assert "mail may only go to @example.com addresses" in answer["value"]
    mails = sorted((tmp_path / "outbox").glob("*.eml"))
    assert len(mails) == 1 and "To: john@example.com" in mails[0].read_text(encoding="utf-8")
    with open(tmp_path / "files" / "tool-calls.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["to"], r["status"]) for r in rows] == [("john@example.com", "success"),
                                                      ("eve@elsewhere.org", "refused")]
    assert rows[1]["error"] == ("vetoed by a hook (node 'deny'): mail may only go to "
                                "@example.com addresses")
