"""Screenshots at 1440x900 for docs/queue.md, from a real queue: Debian's
redis-server on a free loopback port, two `switchboard worker` processes
(one run at a time each, recording in one shared history) and `switchboard
serve` hosting the webhook of an Orders flow (webhook -> POST to an ERP ->
CSV row -> HTTP answer). Five orders come in; the ERP (a local server)
holds every POST until the shots are taken, so two runs are running, one
per worker, and three wait in the queue.

- queue-workers.png: the designer on the Orders flow, Run > Workers… over it;
- queue-remote-run.png: one of the running runs watched live on the canvas:
  the order received and shown in the inspector, the POST under way.

Every process started here is ended at the end, pass or fail.

Run from the repository root: .venv/bin/python docs/queue_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, I001 - a linear script, read top to bottom
import json, os, shutil, sys, tempfile, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
os.environ["QT_QPA_PLATFORM"] = "offscreen"
HOME = Path(tempfile.mkdtemp(prefix="sb-queue-shots-"))
os.environ["SWITCHBOARD_DATA_DIR"] = str(HOME / "data")
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from PySide6.QtCore import QCoreApplication, QPoint, QRect, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QApplication
QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.look import theme
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow
from designer.control.run_controller import qt_event_loop
from tests.servers.redis import RedisServer, free_port
from tests.test_queue import Proc, start_worker
qt_event_loop()
OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
ORDERS = [("A-1041", "Ann Lee", 129.50), ("B-2207", "Bob Marsh", 42.00),
          ("C-3310", "Chen Wu", 310.75), ("D-4102", "Dana Ortiz", 18.20),
          ("E-5093", "Emil Berg", 77.00)]
WAIT = 90.0


def settle(n=30):
    for _ in range(n): app.processEvents()


def until(test, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline: raise SystemExit(f"timed out waiting for {what}")
        app.processEvents(); time.sleep(0.02)


def paint_over(shot, widget, at, title=""):
    """``widget`` (a top-level of its own, which an offscreen window grab
    does not hold) painted onto ``shot`` at ``at``, under a plain title bar
    as a window manager would frame it, with a soft shadow."""
    t = theme.current()
    painter = QPainter(shot)
    bar = 30 if title else 0
    frame = QRect(at.x(), at.y() - bar, widget.width(), widget.height() + bar)
    for i, alpha in enumerate((40, 26, 14, 6)):
        painter.fillRect(frame.adjusted(-i - 1, -i + 1, i + 1, i + 3), QColor(0, 0, 0, alpha))
    if title:
        painter.fillRect(QRect(frame.x(), frame.y(), frame.width(), bar), QColor(t.panel))
        painter.setPen(QColor(t.text))
        painter.drawText(QRect(frame.x(), frame.y(), frame.width(), bar),
                         Qt.AlignmentFlag.AlignCenter, title)
    painter.drawPixmap(at, widget.grab())
    painter.setPen(QColor(t.border))
    painter.drawRect(frame.adjusted(0, 0, -1, -1))
    painter.end()
    return shot


class Erp(BaseHTTPRequestHandler):
    """The ERP the flow posts orders to: it answers once `release` is set."""

    release = threading.Event()
    count = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Erp.release.wait(WAIT)
        Erp.count += 1
        body = json.dumps({"erp_id": 9000 + Erp.count}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def fixed(value):
    return {"scope": "custom", "value": value}


def orders_flow(path, hook_port, erp_port):
    nodes = [
        {"id": "hook", "type": "trigger.webhook", "name": "New order", "position": [80, 220],
         "params": {"path": fixed("/orders"), "port": fixed(hook_port), "method": fixed("POST")}},
        {"id": "received", "type": "core.debug", "name": "Show order",
         "position": [340, 90]},
        {"id": "erp", "type": "http.request", "name": "Post to ERP", "position": [340, 220],
         "params": {"url": fixed(f"http://127.0.0.1:{erp_port}/api/orders"),
                    "method": fixed("POST"), "body": {"scope": "message", "path": "payload"}},
         "outputs": {"response_body": "erp"}},
        {"id": "log", "type": "csv.write", "name": "Append row", "position": [600, 220],
         "params": {"path": fixed(str(HOME / "orders.csv")), "mode": fixed("append"),
                    "rows": {"scope": "message", "path": "payload"}}},
        {"id": "answer", "type": "http.response", "name": "Answer 201", "position": [860, 220],
         "params": {"status": fixed(201), "body": {"scope": "message", "path": "erp"}}},
    ]
    wires = [("hook", "received"), ("hook", "erp"), ("erp", "log"), ("log", "answer")]
    path.write_text(json.dumps({
        "format": "switchboard.flow/1", "name": "Orders", "nodes": nodes,
        "wires": [{"from": [a, "out"], "to": [b, "in"]} for a, b in wires]}, indent=2))
    return path


def send_order(port, order):
    number, customer, total = order
    body = json.dumps([{"order": number, "customer": customer, "total": total}]).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/orders", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=WAIT) as resp:
            resp.read()
    except OSError:
        pass  # the shots are taken by then; serve may be gone


erp = ThreadingHTTPServer(("127.0.0.1", 0), Erp)
erp.daemon_threads = True
threading.Thread(target=erp.serve_forever, daemon=True).start()
procs = []
window = None
redis = RedisServer().start()
try:
    os.environ["SWITCHBOARD_BROKER"] = redis.url
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    shared = HOME / "shared-history.sqlite3"
    for _ in range(2):
        start_worker(procs, env, extra=("--history", str(shared)), wait=False)
    for p in procs:
        p.wait_for("switchboard worker ready")
    hook_port = free_port()
    flow_path = orders_flow(HOME / "orders.flow.json", hook_port, erp.server_address[1])
    serve = Proc(["serve", str(flow_path)], env)
    procs.append(serve)
    serve.wait_for("listening on")
    for order in ORDERS:
        threading.Thread(target=send_order, args=(hook_port, order), daemon=True).start()
        time.sleep(0.15)  # in this order in the queue

    window = MainWindow(FlowDocument.open(str(flow_path)), restore_layout=False)
    window.set_theme("light")
    window.resize(1440, 900); window.show(); settle()
    window.properties_dock.hide()
    window.view.fit_all(); settle()
    queue = window.run_session.queue
    # The flow in the upper part of the canvas: the Workers view goes below it.
    box = window.scene.itemsBoundingRect()
    window.view.centerOn(box.center().x() + 40, box.center().y() + 240); settle()

    # -- queue-workers.png ---------------------------------------------------------------
    dialog = queue.show_workers()
    dialog.resize(860, 440)

    def shown():
        states = [dialog.runs.item(i, 1).text() for i in range(dialog.runs.rowCount())
                  if dialog.runs.item(i, 1)]
        busy = [dialog.workers.item(i, 1).text() for i in range(dialog.workers.rowCount())
                if dialog.workers.item(i, 1)]
        return (sorted(states) == ["queued"] * 3 + ["running"] * 2
                and busy == ["1 of 1", "1 of 1"])

    until(shown, "the Workers view to show 2 running and 3 queued runs")
    running = next(i for i in range(dialog.runs.rowCount())
                   if dialog.runs.item(i, 1).text() == "running")
    dialog.runs.selectRow(running)
    settle()
    OUT.mkdir(parents=True, exist_ok=True)
    shot = window.grab()
    at = QPoint(shot.width() - dialog.width() - 60, shot.height() - dialog.height() - 56)
    paint_over(shot, dialog, at, "Workers").save(str(OUT / "queue-workers.png"))

    # -- queue-remote-run.png: the selected running run, watched live ---------------------
    dialog.watch_button.click()
    dialog.close()
    erp_item = window.scene.item_for_node("erp")
    until(lambda: erp_item.run_state == "running"
          and len(window.run_session.inspector.live.debug) == 1, "the run's POST under way")
    window.resizeDocks([window.inspector_dock], [330], Qt.Orientation.Vertical)
    debug = window.run_session.inspector.debug
    debug.list.setCurrentItem(debug.list.topLevelItem(0))  # its value in the detail pane
    debug.detail.expandAll()
    until(lambda: "… 2." in window.run_session.status.text(), "a moment of the run", timeout=30)
    window.view.fit_all(); settle()
    window.grab().save(str(OUT / "queue-remote-run.png"))

    Erp.release.set()
    until(lambda: not queue.watching, "the watched run to end")
    print(f"wrote {OUT / 'queue-workers.png'} and {OUT / 'queue-remote-run.png'}")
finally:
    Erp.release.set()
    if window is not None:
        window.run_session.queue.stop_watching()
        window.document.undo_stack.setClean()
        window.close()
    for p in reversed(procs):
        p.stop()
    redis.stop()
    erp.shutdown()
    shutil.rmtree(HOME, ignore_errors=True)
