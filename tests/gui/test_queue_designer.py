"""Queue mode in the designer (issue 17): Run on Queue sends the flow on
screen to a real worker (a `switchboard worker` subprocess, Debian's
redis-server on a free port) and the window shows the remote run live: the
node it waits in is badged running on the canvas while the worker holds it,
its debug output reaches the inspector, the status bar says how it ended,
and History has it. The Workers view lists the worker; a run it watches is
shown on the flow on screen only when it runs that flow, else on its own
flow in a window of its own; the shared history opens a run the same way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gui.inspector_fixtures import qt_loop  # noqa: F401
from tests.servers.redis import RedisServer, available
from tests.test_queue import Proc, fixed, gate, start_worker, write_flow

pytestmark = [pytest.mark.skipif(not available(), reason="needs Debian's redis-server"),
              pytest.mark.timeout(240)]

TIMEOUT_MS = 90_000


@pytest.fixture
def queue_env(tmp_path, monkeypatch, data_dir):
    with RedisServer() as server:
        monkeypatch.setenv("SWITCHBOARD_BROKER", server.url)
        env = dict(os.environ, SWITCHBOARD_DATA_DIR=str(tmp_path / "worker-data"),
                   PYTHONUNBUFFERED="1")
        workers: list[Proc] = []
        try:
            yield env, workers
        finally:
            for p in workers:
                p.stop()


def test_designer_runs_on_queue_and_watches_the_remote_run(qt_loop, qtbot, queue_env,  # noqa: F811
                                                           tmp_path: Path):
    from designer.model.document import FlowDocument
    from designer.running.queue_panel import QueueActions
    from designer.window.main_window import MainWindow

    env, workers = queue_env
    start_worker(workers, env)
    go = tmp_path / "go"
    flow = write_flow(tmp_path / "remote.flow.json", "Remote", [
        {"id": "start", "type": "core.inject", "params": {"payload": fixed("from the worker")}},
        gate(go), {"id": "show", "type": "core.debug"}], [("start", "gate"), ("gate", "show")])
    window = MainWindow(FlowDocument.open(str(flow)), restore_layout=False,
                        autosave_interval_ms=3_600_000)
    window.show()
    try:
        session = window.run_session
        queue: QueueActions = session.queue
        run_id = queue.run_on_queue()
        assert run_id
        gate_item = window.scene.item_for_node("gate")
        # Live: the worker holds the run at the gate, and the canvas says so.
        qtbot.waitUntil(lambda: gate_item.run_state == "running", timeout=TIMEOUT_MS)
        assert not session.controller.is_running  # nothing runs in this process
        assert session.stop_action.isEnabled()
        go.touch()
        qtbot.waitUntil(lambda: not queue.watching, timeout=TIMEOUT_MS)
        assert [e.value for e in session.inspector.live.debug] == ["from the worker"]
        assert "Finished" in session.status.text()
        assert session.history.run(run_id).status == "ok"
        dialog = queue.show_workers()
        qtbot.waitUntil(lambda: dialog.workers.rowCount() == 1, timeout=TIMEOUT_MS)
        assert "1 of 1" not in dialog.workers.item(0, 1).text()  # idle again
        dialog.close()
    finally:
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()


def queue_run(path: Path) -> str:
    """Queue a run of the flow file as `switchboard submit` does."""
    from runtime.flow import load_flow
    from runtime.queue import state
    from runtime.queue.app import make_app
    from runtime.queue.submit import enqueue, payload_for

    url = os.environ["SWITCHBOARD_BROKER"]
    return enqueue(make_app(url), state.client(url), payload_for(load_flow(path), str(path)))


def watch_from_workers_view(qtbot, dialog, run_id: str) -> None:
    def listed() -> int | None:
        dialog.refresh()
        for row in range(dialog.runs.rowCount()):
            item = dialog.runs.item(row, 0)
            if item is not None and item.text() == run_id:
                return row
        return None

    qtbot.waitUntil(lambda: listed() is not None, timeout=TIMEOUT_MS)
    dialog.runs.selectRow(listed())
    dialog.watch_button.click()


def test_a_run_of_another_flow_is_shown_on_its_own_flow(qt_loop, qtbot, queue_env,  # noqa: F811
                                                      tmp_path: Path, monkeypatch):
    """Both flows have a node 'gate': the other flow's run must not light up
    the gate on screen. It opens in a window of its own on its flow as it
    runs; a run of the flow on screen is watched on it. Then the shared
    history the worker recorded both in shows one, replayed on its flow."""
    from designer.model.document import FlowDocument
    from designer.running.remote_runs import RunWindow
    from designer.window.main_window import MainWindow

    env, workers = queue_env
    shared = tmp_path / "shared.sqlite3"
    start_worker(workers, env, concurrency=2, extra=("--history", str(shared)))
    monkeypatch.setenv("SWITCHBOARD_SHARED_HISTORY", str(shared))

    def two_step(name: str, value: str, go: Path) -> Path:
        return write_flow(tmp_path / f"{name.lower()}.flow.json", name, [
            {"id": "start", "type": "core.inject", "params": {"payload": fixed(value)}},
            gate(go), {"id": "show", "type": "core.debug"}], [("start", "gate"), ("gate", "show")])

    here_go, other_go = tmp_path / "go-here", tmp_path / "go-other"
    here = two_step("Here", "from here", here_go)
    other = two_step("Other", "from elsewhere", other_go)
    window = MainWindow(FlowDocument.open(str(here)), restore_layout=False,
                        autosave_interval_ms=3_600_000)
    window.show()
    opened: list = []
    try:
        queue = window.run_session.queue
        dialog = queue.show_workers()
        other_id = queue_run(other)
        watch_from_workers_view(qtbot, dialog, other_id)
        assert len(queue.windows) == 1
        run_window: RunWindow = queue.windows[0]
        opened.append(run_window)
        assert run_window.document.flow.name == "Other"
        assert other_id in run_window.windowTitle()
        qtbot.waitUntil(lambda: run_window.scene.item_for_node("gate").run_state == "running",
                        timeout=TIMEOUT_MS)
        # Nothing of it on the flow on screen.
        assert window.scene.item_for_node("gate").run_state == "idle"
        assert not queue.watching and not window.run_session.inspector.live.run_id
        # A run of the flow on screen is watched on it.
        here_id = queue_run(here)
        watch_from_workers_view(qtbot, dialog, here_id)
        assert queue.watching and len(queue.windows) == 1
        qtbot.waitUntil(lambda: window.scene.item_for_node("gate").run_state == "running",
                        timeout=TIMEOUT_MS)
        here_go.touch()
        other_go.touch()
        other_queue = run_window.run_session.queue
        qtbot.waitUntil(lambda: not queue.watching and not other_queue.watching,
                        timeout=TIMEOUT_MS)
        assert [e.value for e in window.run_session.inspector.live.debug] == ["from here"]
        assert [e.value for e in run_window.run_session.inspector.live.debug] == \
            ["from elsewhere"]
        assert "Finished" in run_window.run_session.status.text()
        dialog.close()
        run_window.close()
        qtbot.waitUntil(lambda: not queue.windows, timeout=TIMEOUT_MS)
        opened.clear()

        # The shared history: both runs, each with the worker that ran it.
        history = queue.show_shared_history()
        opened.append(history)
        ids = [history.table.item(i, 0).text() for i in range(history.table.rowCount())]
        assert sorted(ids) == sorted([here_id, other_id])
        row = ids.index(other_id)
        assert history.table.item(row, 4).text().endswith(f"@{os.uname().nodename}")
        history.table.selectRow(row)
        stored = history.open_selected()
        opened.append(stored)
        assert stored is not None and stored.document.flow.name == "Other"
        assert stored.scene.item_for_node("gate").run_state == "done"
        assert [e.value for e in stored.run_session.inspector.live.debug] == ["from elsewhere"]
        assert window.scene.item_for_node("gate").run_state == "done"  # its own run's, kept
    finally:
        for w in opened:
            w.close()
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()
