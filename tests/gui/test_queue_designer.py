"""Queue mode in the designer (issue 17): Run on Queue sends the flow on
screen to a real worker (a `switchboard worker` subprocess, Debian's
redis-server on a free port) and the window shows the remote run live: the
node it waits in is badged running on the canvas while the worker holds it,
its debug output reaches the inspector, the status bar says how it ended,
and History has it. The Workers view lists the worker."""

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
    from designer.document import FlowDocument
    from designer.main_window import MainWindow
    from designer.queue_panel import QueueActions

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
