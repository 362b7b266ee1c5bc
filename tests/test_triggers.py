"""Triggers for real: trigger.schedule fires on its timetable, trigger.file
reports changes to real files, `switchboard run` serves a trigger flow until
--timeout, and the designer shows a schedule's next fire times.

No test compares a measured time: runs are stopped after a counted number of
messages, and every wait is for an event, bounded so that a broken node fails
the test instead of hanging it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from nodes.triggers.schedule import Schedule
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import parse_flow, validate_flow
from runtime.registry import Registry

REG = Registry.default()
ROOT = Path(__file__).resolve().parents[1]
#: Bound on each wait for an event (not an expected duration).
WAIT = 15.0


def fixed(v):
    return {"scope": "custom", "value": v}


def trigger_flow(type_: str, **params) -> dict:
    return {"format": "switchboard.flow/1", "name": "trigger", "nodes": [
        {"id": "trig", "type": type_, "params": {k: fixed(v) for k, v in params.items()}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], "wires": [{"from": ["trig", "out"], "to": ["show", "in"]}]}


def problems(type_: str, **params) -> list[tuple[str | None, str]]:
    flow = parse_flow(trigger_flow(type_, **params))
    return [(p.field, p.message) for p in validate_flow(flow, REG) if p.severity == "error"]


class Served:
    """A flow's run in a task, its debug values and statuses as they come."""

    def __init__(self, data: dict) -> None:
        self.bus = EventBus()
        self.engine = Engine(parse_flow(data), REG, self.bus)
        self.values: asyncio.Queue = asyncio.Queue()
        self.debug: list = []
        self.statuses: list[str] = []
        self.status_seen = asyncio.Event()
        self.events: list = []
        self.bus.subscribe(self._on_event)

    def _on_event(self, e) -> None:
        self.events.append(e)
        if e.type == "debug":
            self.debug.append(e.value)
            self.values.put_nowait(e.value)
        elif e.type == "node.status" and e.node == "trig":
            self.statuses.append(e.text)
            self.status_seen.set()

    async def __aenter__(self) -> Served:
        self.task = asyncio.ensure_future(self.engine.run(timeout=60))
        return self

    async def __aexit__(self, *exc) -> None:
        self.engine.stop("test over")
        self.result = await asyncio.wait_for(self.task, WAIT)

    async def next_value(self):
        return await asyncio.wait_for(self.values.get(), WAIT)

    async def status(self, prefix: str) -> str:
        async def wait():
            while True:
                for s in self.statuses:
                    if s.startswith(prefix):
                        return s
                self.status_seen.clear()
                await self.status_seen.wait()
        return await asyncio.wait_for(wait(), WAIT)


# -- trigger.schedule -------------------------------------------------------------------

async def test_an_interval_schedule_fires_until_the_run_is_stopped():
    bus = EventBus()
    engine = Engine(parse_flow(trigger_flow("trigger.schedule", interval_seconds=0.1,
                                            timezone="UTC", fire_at_start=True)), REG, bus)
    seen: list = []
    statuses: list[str] = []

    def on_event(e):
        if e.type == "debug":
            seen.append(e.value)
            if len(seen) == 3:
                engine.stop("three fires are enough")
        elif e.type == "node.status":
            statuses.append(e.text)

    bus.subscribe(on_event)
    result = await engine.run(timeout=60)
    assert result.reason == "interrupted" and result.message == "three fires are enough"
    assert len(seen) == 3
    scheduled = [datetime.fromisoformat(m["scheduled_for"]) for m in seen]
    # On a grid from the start: no drift, whatever the loop's delays.
    assert [b - a for a, b in zip(scheduled, scheduled[1:], strict=False)] == [timedelta(seconds=0.1)] * 2
    for m in seen:
        assert datetime.fromisoformat(m["fired_at"]) >= datetime.fromisoformat(m["scheduled_for"])
        assert m["payload"] == {"fired_at": m["fired_at"], "scheduled_for": m["scheduled_for"]}
        assert m["scheduled_for"].endswith("+00:00")
    assert len({m["_msgid"] for m in seen}) == 3
    # After each fire the status names the next time.
    nexts = [s for s in statuses if s.startswith("next: ")]
    assert len(nexts) >= 2 and nexts[0].endswith(" UTC")


async def test_count_ends_the_run_by_itself_with_the_payload_set():
    bus = EventBus()
    seen: list = []
    bus.subscribe(lambda e: e.type == "debug" and seen.append(e.value))
    engine = Engine(parse_flow(trigger_flow("trigger.schedule", interval_seconds=0.1, count=2,
                                            payload={"job": "sync"}, topic="nightly")), REG, bus)
    result = await engine.run(timeout=60)
    assert result.reason == "completed"
    assert [(m["payload"], m["topic"]) for m in seen] == [({"job": "sync"}, "nightly")] * 2


def test_next_five_cron_times_for_a_fixed_start_and_zone():
    berlin = ZoneInfo("Europe/Berlin")
    params = {"cron": fixed("0 9 * * 1-5"), "timezone": fixed("Europe/Berlin")}
    # Friday 28 March 2025, 10:00: past today's 9:00; the clocks go forward on
    # Sunday the 30th, so Monday's 9:00 is UTC+2.
    times = Schedule.next_fire_times(params, 5, now=datetime(2025, 3, 28, 10, 0, tzinfo=berlin))
    assert [t.isoformat() for t in times] == [
        "2025-03-31T09:00:00+02:00", "2025-04-01T09:00:00+02:00", "2025-04-02T09:00:00+02:00",
        "2025-04-03T09:00:00+02:00", "2025-04-04T09:00:00+02:00"]
    # A start given in another zone is the same instant; plain values work too.
    ny = Schedule.next_fire_times({"cron": "*/20 * * * *", "timezone": "America/New_York"}, 3,
                                  now=datetime(2025, 1, 1, 12, 5, tzinfo=ZoneInfo("UTC")))
    assert [t.isoformat() for t in ny] == [
        "2025-01-01T07:20:00-05:00", "2025-01-01T07:40:00-05:00", "2025-01-01T08:00:00-05:00"]


def test_the_designer_hint_lists_five_times_or_the_problem():
    hint = Schedule.param_hint("cron", {"cron": fixed("@daily"), "timezone": fixed("UTC")})
    head, *lines = hint.splitlines()
    assert head == "Next fire times:" and len(lines) == 5
    assert all(line.endswith(" 00:00 UTC") for line in lines)
    assert Schedule.param_hint("timezone", {"cron": fixed("@daily")}) is None
    assert Schedule.param_hint("interval_seconds", {"interval_seconds": fixed(90.0)}) \
        .startswith("Next fire times:\n")
    assert Schedule.param_hint("cron", {"cron": fixed("61 * * * *")}).startswith(
        "⚠ cron '61 * * * *' is not valid")


@pytest.mark.parametrize("params, field, text", [
    ({"cron": "61 * * * *"}, "params.cron", "cron '61 * * * *' is not valid"),
    ({"cron": "* * * *"}, "params.cron", "cron '* * * *' has 4 fields; it needs 5"),
    ({"cron": "*/5 * * * * *"}, "params.cron", "cron '*/5 * * * * *' has 6 fields"),
    ({}, "params.cron", "set a cron expression"),
    ({"interval_seconds": 0.01}, "params.interval_seconds",
     "interval_seconds must be at least 0.1 (got 0.01)"),
    ({"interval_seconds": 5, "cron": "@hourly"}, "params.interval_seconds",
     "set either a cron expression or interval_seconds, not both"),
    ({"cron": "@daily", "timezone": "Mars/Olympus"}, "params.timezone",
     "timezone 'Mars/Olympus' is not a known time zone"),
    ({"interval_seconds": 1, "count": -1}, "params.count", "count must be 0"),
])
def test_bad_schedules_are_refused_when_the_flow_loads(params, field, text):
    [(got_field, message)] = problems("trigger.schedule", **params)
    assert got_field == field
    assert message.startswith(text), message


def test_schedule_spec():
    spec = REG.spec("trigger.schedule")
    assert spec.source and spec.inputs == [] and spec.category == "Triggers"
    assert spec.icon == "calendar" and spec.color
    assert REG.spec("trigger.file").icon == "folder-watch"
    for type_ in ("trigger.schedule", "trigger.file", "mail.read"):
        svg = ROOT / "resources" / "icons" / f"{REG.spec(type_).icon}.svg"
        assert 'stroke="currentColor"' in svg.read_text(encoding="utf-8"), type_


# -- trigger.file -------------------------------------------------------------------------

async def test_file_changes_become_messages(tmp_path):
    watched = tmp_path / "in"
    watched.mkdir()
    flow = trigger_flow("trigger.file", folder=str(watched), glob="*.csv", settle_seconds=0.05)
    async with Served(flow) as run:
        await run.status("watching")
        # Written under another name and renamed, as a careful program does:
        # the file appears whole, in one change.
        (watched / "a.part").write_text("x,y\n1,2\n")
        os.replace(watched / "a.part", watched / "a.csv")
        added = (await run.next_value())["payload"]
        assert added == {"event": "added", "path": str(watched / "a.csv"), "name": "a.csv",
                         "relative": "a.csv", "size": 8}
        (watched / "notes.txt").write_text("not a csv")  # outside the glob
        with (watched / "a.csv").open("a") as f:
            f.write("3,4\n")
        modified = await run.next_value()
        assert (modified["payload"]["event"], modified["payload"]["size"]) == ("modified", 12)
        assert modified["topic"] == "modified"
        (watched / "a.csv").unlink()
        deleted = (await run.next_value())["payload"]
        assert deleted["event"] == "deleted" and deleted["size"] is None
    assert [m["payload"]["event"] for m in run.debug] == ["added", "modified", "deleted"]
    # Serving until stopped; nothing was left half done.
    assert run.result.reason == "interrupted" and run.result.in_flight == {}


async def test_only_chosen_events_inside_the_folder_are_reported(tmp_path):
    watched, outside = tmp_path / "in", tmp_path / "outside"
    (watched / "sub").mkdir(parents=True)
    outside.mkdir()
    (watched / "link").symlink_to(outside, target_is_directory=True)
    (watched / "sub" / "old.csv").write_text("old")
    flow = trigger_flow("trigger.file", folder=str(watched), recursive=True,
                        events="added, deleted", settle_seconds=0.05)
    async with Served(flow) as run:
        await run.status("watching")
        (outside / "secret.csv").write_text("reached through a link")
        (watched / "sub" / "old.csv").write_text("modified: not asked for")
        (watched / "sub" / "new.csv").write_text("new")
        while True:
            value = await run.next_value()
            if value["payload"]["name"] == "new.csv":
                break
    names = [(m["payload"]["event"], m["payload"]["relative"]) for m in run.debug]
    assert names == [("added", "sub/new.csv")]


async def test_existing_files_are_sent_at_start_when_asked(tmp_path):
    watched, outside = tmp_path / "in", tmp_path / "outside"
    (watched / "sub").mkdir(parents=True)
    outside.mkdir()
    (watched / "b.xlsx").write_bytes(b"12345")
    (watched / "a.xlsx").write_bytes(b"1")
    (watched / "notes.txt").write_text("not matched")
    (watched / "sub" / "c.xlsx").write_bytes(b"12")
    (outside / "secret.xlsx").write_bytes(b"x")
    (watched / "link.xlsx").symlink_to(outside / "secret.xlsx")
    flow = trigger_flow("trigger.file", folder=str(watched), glob="*.xlsx", recursive=True,
                        existing=True, settle_seconds=0.05)
    async with Served(flow) as run:
        await run.status("watching")
        first = [await run.next_value() for _ in range(3)]
    assert [(m["topic"], m["payload"]["relative"], m["payload"]["size"]) for m in first] == [
        ("existing", "a.xlsx", 1), ("existing", "b.xlsx", 5), ("existing", "sub/c.xlsx", 2)]
    assert len(run.debug) == 3  # not the link that leads out, not the .txt


def test_bad_watch_settings_are_refused_when_the_flow_loads():
    assert problems("trigger.file", folder="/tmp", events="added, renamed") == [
        ("params.events", "events: 'renamed' is not one of added, modified, deleted")]
    assert problems("trigger.file", folder="/tmp", glob="../*.csv") == [
        ("params.glob", "glob '../*.csv' must be a pattern inside the folder, such as *.csv "
                        "or reports/*.xlsx")]
    assert problems("trigger.file", folder="/tmp", settle_seconds=0) == [
        ("params.settle_seconds", "settle_seconds must be 0.01-60 (got 0)")]
    assert ("params.folder", "folder: choose the folder to watch") in problems("trigger.file")


async def test_a_missing_folder_fails_the_run_with_its_name(tmp_path):
    bus = EventBus()
    errors: list = []
    bus.subscribe(lambda e: e.type == "node.error" and errors.append(e.message))
    engine = Engine(parse_flow(trigger_flow("trigger.file", folder=str(tmp_path / "nope"))),
                    REG, bus)
    result = await engine.run(timeout=30)
    assert result.status == "error"
    assert errors == [f"folder: '{tmp_path / 'nope'}' does not exist"]


# -- the CLI serves a trigger flow ----------------------------------------------------------

def test_switchboard_run_serves_a_schedule_until_timeout(tmp_path):
    path = tmp_path / "tick.flow.json"
    path.write_text(json.dumps(trigger_flow("trigger.schedule", interval_seconds=0.2,
                                            fire_at_start=True, timezone="UTC")))
    env = dict(os.environ, SWITCHBOARD_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(path),
                           "--timeout", "1"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    fires = [line for line in lines if line.get("node") == "show"]
    assert fires, proc.stdout
    assert "scheduled_for" in fires[0]["value"]


# -- the designer shows the next fire times -------------------------------------------------

def _hint_times(text: str) -> list[datetime]:
    head, *lines = text.splitlines()
    assert head == "Next fire times:", text
    return [datetime.strptime(" ".join(line.split()[1:3]), "%Y-%m-%d %H:%M") for line in lines]


def test_the_properties_panel_lists_five_fire_times_under_the_cron(qtbot):
    from designer.model.document import FlowDocument
    from designer.panels import PropertiesPanel
    from runtime.flow import Flow

    flow = Flow.model_validate(trigger_flow("trigger.schedule", cron="30 9 * * 1-5",
                                            timezone="Europe/Berlin"))
    doc = FlowDocument(flow, REG)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(380, 860)
    panel.show()
    panel.set_node("trig")
    hint = panel.form.hints.labels["cron"]
    assert hint.isVisible()
    times = _hint_times(hint.text())
    assert len(times) == 5 and times == sorted(times)
    assert all((t.hour, t.minute) == (9, 30) and t.weekday() < 5 for t in times)
    assert times[0] > datetime.now(ZoneInfo("Europe/Berlin")).replace(tzinfo=None)
    # Only the param that sets the timetable has one.
    assert not panel.form.hints.labels["timezone"].isVisible()

    # Typing a new expression updates it as the flow changes; a bad one says why.
    edit = panel.form.rows["cron"].value_editor.edit
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "0 */6 * * *")
    assert doc.node("trig").params["cron"].value == "0 */6 * * *"
    six_hourly = _hint_times(hint.text())
    assert len(six_hourly) == 5
    assert all(t.hour % 6 == 0 and t.minute == 0 for t in six_hourly)
    assert {(b - a).total_seconds() for a, b in zip(six_hourly, six_hourly[1:], strict=False)} \
        <= {6 * 3600, 7 * 3600, 5 * 3600}  # 6 h, or 5/7 across a daylight-saving change
    edit.selectAll()
    qtbot.keyClicks(edit, "61 * * * *")
    assert hint.text().startswith("⚠ cron '61 * * * *' is not valid")
    doc.undo_stack.undo()
    assert hint.text().startswith("Next fire times:")


def test_nodes_without_the_hook_get_no_hint_labels(qtbot):
    from designer.model.document import FlowDocument
    from designer.panels import PropertiesPanel
    from designer.panels.param_hint import param_hint
    from runtime.flow import Flow

    doc = FlowDocument(Flow.model_validate(trigger_flow("trigger.file", folder="/tmp")), REG)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.set_node("show")
    assert panel.form.hints.labels == {}
    assert param_hint("core.debug", "path", {}) is None
    assert param_hint("no.such.type", "x", {}) is None
    assert param_hint("trigger.schedule", "cron", {}, REG) == \
        "Set a cron expression or interval_seconds"


# -- the docs' flows still load ---------------------------------------------------------------

def test_every_flow_in_the_docs_loads():
    import re

    doc = (ROOT / "docs" / "nodes-triggers-and-mail-in.md").read_text(encoding="utf-8")
    flows = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", doc, re.S)
             if '"switchboard.flow/1"' in b]
    assert len(flows) == 5
    for data in flows:
        flow = parse_flow(data)
        assert [str(p) for p in validate_flow(flow, REG) if p.severity == "error"] == [], \
            data["name"]
