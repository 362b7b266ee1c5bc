"""``core.python``: a Python function body over ``msg``, run in a worker
process of its own.

Each node gets one worker per run: a ``python -I`` subprocess started in
``start()``, kept warm between messages, killed when the run ends. Host and
worker speak JSON lines over the worker's stdin and stdout: the first line
configures the worker (the script, the memory cap, the output bound), the
worker answers whether the script compiled, then it answers one line per
message. The worker imports nothing of Switchboard, so a script cannot reach
the engine, other nodes or the run's secrets.

Bounds: a per-message time limit (past it the worker is killed; the next
message starts a new one), a memory cap (``RLIMIT_AS``, set by the worker on
itself), a bound on the size of what comes back, and on the printed text.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from typing import Any

from runtime.message import MESSAGE_TYPE, TOOL_REQUEST, Message, new_msgid
from runtime.node import (
    AI,
    CUSTOM,
    DROP,
    MESSAGE,
    Node,
    NodeConfigError,
    Output,
    Param,
    Tool,
    node,
    run_in_thread,
)

DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 86_400.0
DEFAULT_MEMORY_MB = 512
MIN_MEMORY_MB = 64
MAX_MEMORY_MB = 1_048_576
DEFAULT_MAX_OUTPUT = 1_000_000
MIN_MAX_OUTPUT = 1024
MAX_MAX_OUTPUT = 256 * 1024 * 1024
#: Most characters of one script.
MAX_CODE_CHARS = 1_000_000
#: Most bytes of JSON one message may take on its way into the worker.
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: Most characters the script may print per message; the rest is counted.
PRINT_LIMIT = 64 * 1024
#: Time a new worker has to start Python and compile the script; not part of
#: the script's own timeout_seconds, so a slow machine never fails a message.
STARTUP_TIMEOUT = 60.0

# The worker program. It runs as ``python -I -c WORKER_SOURCE`` and imports
# only the standard library; the host also executes it (as a module, so
# main() does not run) to compile scripts for the flow check with exactly
# the worker's rules.
WORKER_SOURCE = r'''
import ast
import io
import json
import os
import sys
import threading
import traceback

SCRIPT = "<script>"


class _Drop:
    def __repr__(self):
        return "DROP"


DROP = _Drop()


def compile_script(code):
    """(function, None) or (None, "line N: SyntaxError: ...")."""
    try:
        tree = ast.parse(code, SCRIPT)
        # The script's statements become the body of def __script__(msg, args)
        # as they are: line numbers stay the user's, and no re-indenting can
        # change a multi-line string.
        module = ast.parse("def __script__(msg, args):\n    pass\n", SCRIPT)
        module.body[0].body = tree.body or module.body[0].body
        code_obj = compile(module, SCRIPT, "exec")
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        text = f"{where}{type(exc).__name__}: {exc.msg}"
        src = (exc.text or "").strip()
        if src:
            text += f" ({src[:80]})"
        return None, text
    except (ValueError, MemoryError, RecursionError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    namespace = {"__name__": "__script__", "__builtins__": __builtins__, "DROP": DROP}
    exec(code_obj, namespace)
    fn = namespace["__script__"]
    if fn.__code__.co_flags & 0x20:  # CO_GENERATOR
        line = next((n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Yield, ast.YieldFrom))), 1)
        return None, f"line {line}: the script uses yield; return a list of messages instead"
    return fn, None


def error_text(exc, memory_mb):
    """"line N: Type: text", N the line of the script where it happened."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == SCRIPT:
            line = frame.lineno
    if isinstance(exc, MemoryError):
        detail = f"the script needs more memory than max_memory_mb={memory_mb} allows"
    elif isinstance(exc, SystemExit):
        detail = "the script called exit(); return DROP to send nothing"
    elif isinstance(exc, KeyboardInterrupt):
        detail = "interrupted"
    else:
        try:
            detail = str(exc)
        except Exception:
            detail = ""
    head = f"line {line}: " if line else ""
    text = f"{head}{type(exc).__name__}: {detail}" if detail else f"{head}{type(exc).__name__}"
    return text[:2000]


class Capture(io.TextIOBase):
    """sys.stdout/sys.stderr of a script: keeps the first ``limit`` characters."""

    def __init__(self, limit):
        self.limit = limit
        self.parts = []
        self.kept = 0
        self.lost = 0

    def writable(self):
        return True

    def write(self, s):
        s = str(s)
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(s[:room])
            self.kept += min(room, len(s))
        self.lost += max(0, len(s) - max(room, 0))
        return len(s)

    def text(self):
        out = "".join(self.parts)
        if self.lost:
            out += f"\n... ({self.lost} more characters not kept)"
        return out


def set_memory_cap(mb):
    try:
        import resource
    except ImportError:  # Windows
        return False
    try:
        limit = mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        return False
    return True


def outcome(result, msg):
    """(kind, value) of what the script returned, or raise TypeError."""
    if result is None:
        return "msg", msg
    if result is DROP or result is False:
        return "drop", None
    if isinstance(result, dict):
        return "msg", result
    if isinstance(result, list):
        for i, item in enumerate(result):
            if not isinstance(item, dict):
                raise TypeError(f"the script returned a list whose item {i} is "
                                f"{type(item).__name__}; a list must hold messages (dicts)")
        return "list", result
    raise TypeError(f"the script returned {type(result).__name__}; return msg, a list of "
                    "messages, None (send msg on) or DROP (send nothing)")


def run_one(fn, request, config):
    capture = Capture(config["print_limit"])
    sys.stdout = sys.stderr = capture
    try:
        msg = request["msg"]
        try:
            result = fn(msg, request.get("args"))
        except BaseException as exc:
            return {"ok": False, "error": error_text(exc, config["memory_mb"])}, capture.text()
        try:
            kind, value = outcome(result, msg)
        except TypeError as exc:
            return {"ok": False, "error": str(exc)}, capture.text()
        try:
            encoded = json.dumps(value, ensure_ascii=False)
        except MemoryError as exc:
            return {"ok": False, "error": error_text(exc, config["memory_mb"])}, capture.text()
        except (TypeError, ValueError, RecursionError) as exc:
            return {"ok": False, "error": f"the script's result is not JSON: {exc}"}, capture.text()
        size = len(encoded.encode("utf-8", "surrogatepass"))
        if size > config["max_output"]:
            return {"ok": False, "error": f"the script's result is {size} bytes of JSON, more "
                    f"than max_output_bytes={config['max_output']}"}, capture.text()
        return {"ok": True, "kind": kind, "value": encoded}, capture.text()
    finally:
        sys.stdout = sys.__stdout__
        sys.stderr = sys.__stderr__


def watch_parent(parent):
    """End the worker when the process that started it is gone (killed
    without a chance to stop it), even while a script loops forever: a
    pure-Python loop still lets this thread in every few milliseconds."""
    import time

    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def main():
    import threading

    threading.stack_size(256 * 1024)  # the memory cap counts a thread's stack
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    # The answers go to a private copy of fd 1; fd 1 itself then points
    # where stderr goes, so that a C library or os.write(1, ...) in a script
    # cannot break the protocol.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer

    def answer(obj, value=None):
        line = json.dumps(obj, ensure_ascii=False)
        if value is not None:  # already JSON: spliced in, not encoded twice
            line = line[:-1] + ', "value": ' + value + "}"
        out.write(line.encode("utf-8", "surrogatepass") + b"\n")
        out.flush()

    config = json.loads(stdin.readline())
    capped = set_memory_cap(config["memory_mb"])
    fn, problem = compile_script(config["code"])
    answer({"ready": fn is not None, "error": problem, "capped": capped, "pid": os.getpid()})
    if fn is None:
        return
    for line in stdin:
        try:
            request = json.loads(line)
        except (ValueError, MemoryError) as exc:
            answer({"ok": False, "error": f"the message could not be read: {exc}", "prints": ""})
            continue
        result, prints = run_one(fn, request, config)
        request = None
        value = result.pop("value", None)
        result["prints"] = prints
        answer(result, value)


if __name__ == "__main__":
    main()
'''

_worker_ns: dict[str, Any] | None = None


def _worker_module() -> dict[str, Any]:
    """The worker's functions in this process (for compile checks)."""
    global _worker_ns
    if _worker_ns is None:
        ns: dict[str, Any] = {"__name__": "switchboard_python_worker"}
        exec(compile(WORKER_SOURCE, "<switchboard-python-worker>", "exec"), ns)
        _worker_ns = ns
    return _worker_ns


def script_problem(code: str) -> str | None:
    """Why ``code`` does not compile ("line N: SyntaxError: ..."), or None.
    Compiles only; nothing of the script runs."""
    if len(code) > MAX_CODE_CHARS:
        return f"the script is {len(code)} characters, more than {MAX_CODE_CHARS}"
    _, problem = _worker_module()["compile_script"](code)
    return problem


class ScriptError(NodeConfigError):
    """The script failed; the text names the line."""


class WorkerGone(Exception):
    pass


class ScriptWorker:
    """One worker process and its pipes. Every method that reads or writes a
    pipe blocks: the node calls them in a thread, under a timeout."""

    def __init__(self, code: str, memory_mb: int, max_output: int) -> None:
        self.config = {"code": code, "memory_mb": memory_mb, "max_output": max_output,
                       "print_limit": PRINT_LIMIT}
        # Longest answer line: the result, the prints (JSON may write a
        # character as 6 bytes) and the envelope.
        self.line_limit = max_output + 6 * PRINT_LIMIT + 4096
        self.ready: bool | None = None  # None until the worker has answered
        self.capped = False
        kwargs: dict[str, Any] = {}
        if os.name == "posix":
            kwargs["start_new_session"] = True  # its own group: killed with its children
        elif os.name == "nt":
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP
        # One malloc arena: glibc reserves 64 MB of address space for each
        # thread's own arena, which the cap (RLIMIT_AS) would count as used.
        env = {**os.environ, "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "1")}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", WORKER_SOURCE], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True, env=env, **kwargs)
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self) -> dict:
        line = self.proc.stdout.readline(self.line_limit)  # type: ignore[union-attr]
        if not line:
            raise WorkerGone(self._exit_text())
        if not line.endswith(b"\n"):
            self.kill()
            raise WorkerGone(f"the worker sent an answer longer than {self.line_limit} bytes")
        return json.loads(line)

    def _exit_text(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        return f"the Python worker stopped (exit code {code})"

    def wait_ready(self) -> dict:
        """Send the configuration; the worker's first answer."""
        try:
            self.proc.stdin.write(json.dumps(self.config).encode() + b"\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            raise WorkerGone(self._exit_text()) from None
        hello = self._read()
        self.ready = bool(hello.get("ready"))
        self.capped = bool(hello.get("capped"))
        return hello

    def call(self, request: bytes) -> dict:
        try:
            self.proc.stdin.write(request)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            raise WorkerGone(self._exit_text()) from None
        return self._read()

    def kill(self) -> None:
        """Kill the worker and whatever it started; reap it."""
        if self.proc.returncode is None:
            try:
                if os.name == "posix":
                    os.killpg(self.proc.pid, 9)
                else:
                    self.proc.kill()
            except (ProcessLookupError, PermissionError, OSError):
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        # Closing a pipe waits for a thread still blocked on it (a call that
        # timed out); that thread wakes when the worker's end closes, which
        # a process that left the group could delay. So close from a thread
        # of its own, never blocking the event loop.
        threading.Thread(target=self._close_pipes, name="switchboard-python-close",
                         daemon=True).start()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass


def _seconds(value: float) -> str:
    return f"{value:g}"


@node("core.python", name="Python", category="Core", icon="code", color="#3776ab",
      tool=Tool("run_python", "Run this flow's Python script on an input value and return "
                "its result"))
class Python(Node):
    """Runs a Python function body over each message, in a worker process
    of its own (kept warm between messages, one per node and run). ``msg``
    is the message, ``args`` the tool input. Return ``msg`` (or nothing) to
    send it on, a list of messages to send several, ``DROP`` or ``False`` to
    send nothing. Messages cross to the worker as JSON."""

    concurrency = 1  # one worker, one message at a time, in order

    code = Param(str, "The body of a function of msg (the message, a JSON object) and args "
                 "(the tool input). Return msg or nothing: send msg on; a list of messages: "
                 "send each; DROP or False: send nothing", default="return msg",
                 multiline=True, allow=CUSTOM)
    input = Param("json", "The input for the script, available to it as args (in a tool call "
                  "the LLM's argument; otherwise msg.input, a fixed value or a message path)",
                  scope=AI, allow=AI | CUSTOM | MESSAGE)
    timeout_seconds = Param(float, "Longest a script may run for one message; past it the "
                            "worker is stopped and the message fails",
                            default=DEFAULT_TIMEOUT, allow=CUSTOM)
    max_memory_mb = Param(int, "Memory cap of the worker process in MB (address space); past it "
                          "the script gets a MemoryError", default=DEFAULT_MEMORY_MB,
                          allow=CUSTOM)
    max_output_bytes = Param(int, "Largest result (the returned messages as JSON) a script may "
                             "send back", default=DEFAULT_MAX_OUTPUT, allow=CUSTOM)

    result = Output("json", "As a tool: the payload of the message the script returned (a list "
                    "of payloads for a list; null for DROP)")

    @classmethod
    def check(cls, params):
        problems = []
        code = params.get("code")
        if code is not None and isinstance(code.value, str):
            problem = script_problem(code.value)
            if problem:
                problems.append(("code", problem))
        for name, low, high in (("timeout_seconds", 0.0, MAX_TIMEOUT),
                                ("max_memory_mb", MIN_MEMORY_MB, MAX_MEMORY_MB),
                                ("max_output_bytes", MIN_MAX_OUTPUT, MAX_MAX_OUTPUT)):
            p = params.get(name)
            if p is not None and isinstance(p.value, (int, float)) and p.value is not None:
                why = _range_problem(name, p.value, low, high)
                if why:
                    problems.append((name, why))
        return problems

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._worker: ScriptWorker | None = None
        self._problem: str | None = None  # the script does not compile: every message fails

    def _settings(self) -> tuple[str, float, int, int]:
        code = self.code.get()
        if not isinstance(code, str):
            raise NodeConfigError("code: the script must be text")
        timeout = self.timeout_seconds.get()
        memory = self.max_memory_mb.get()
        output = self.max_output_bytes.get()
        for name, value, low, high in (("timeout_seconds", timeout, 0.0, MAX_TIMEOUT),
                                       ("max_memory_mb", memory, MIN_MEMORY_MB, MAX_MEMORY_MB),
                                       ("max_output_bytes", output, MIN_MAX_OUTPUT,
                                        MAX_MAX_OUTPUT)):
            why = _range_problem(name, value, low, high)
            if why:
                raise NodeConfigError(why)
        return code, float(timeout), int(memory), int(output)

    async def start(self) -> None:
        code, _, memory, output = self._settings()
        problem = script_problem(code)
        if problem:
            raise ScriptError(f"code: {problem}")
        # Started now, answered later: Python boots while the flow starts.
        self._worker = ScriptWorker(code, memory, output)

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()

    @property
    def worker_pid(self) -> int | None:
        """The current worker's process id (None: no worker right now)."""
        return self._worker.pid if self._worker is not None else None

    async def _ready_worker(self) -> ScriptWorker:
        worker = self._worker
        if worker is None or not worker.alive():
            if worker is not None:
                worker.kill()
            code, _, memory, output = self._settings()
            worker = self._worker = ScriptWorker(code, memory, output)
        if worker.ready is None:
            try:
                hello = await asyncio.wait_for(run_in_thread(worker.wait_ready), STARTUP_TIMEOUT)
            except (TimeoutError, WorkerGone, ValueError) as exc:
                self._drop_worker(worker)
                why = str(exc) if isinstance(exc, WorkerGone) else \
                    f"it did not start within {STARTUP_TIMEOUT:g} s"
                raise ScriptError(f"the Python worker could not start: {why}; is "
                                  f"max_memory_mb={self.max_memory_mb.get()} too small?") from None
            except BaseException:
                self._drop_worker(worker)
                raise
            if not hello.get("ready"):
                self._problem = str(hello.get("error") or "the script does not compile")
                self._drop_worker(worker)
                raise ScriptError(f"code: {self._problem}")
            if not worker.capped:
                self.show_status("memory cap not enforced on this system", "yellow", "idle")
        return worker

    def _drop_worker(self, worker: ScriptWorker) -> None:
        worker.kill()
        if self._worker is worker:
            self._worker = None

    async def on_message(self, msg: Message) -> Any:
        if self._problem:
            raise ScriptError(f"code: {self._problem}")
        _, timeout, _, _ = self._settings()
        tool = msg.get(MESSAGE_TYPE) == TOOL_REQUEST
        args = self.input.get(msg)
        view = {k: v for k, v in msg.items() if not (k.startswith("__") and k.endswith("__"))} \
            if tool else msg
        request = _encode_request(view, args)
        worker = await self._ready_worker()
        try:
            answer = await asyncio.wait_for(run_in_thread(worker.call, request), timeout)
        except TimeoutError:
            self._drop_worker(worker)
            self.show_status(f"stopped after {_seconds(timeout)} s", "red", "error")
            raise ScriptError(f"the script did not finish within {_seconds(timeout)} s "
                              "(timeout_seconds); its worker was stopped, and the next message "
                              "gets a new one") from None
        except WorkerGone as exc:
            self._drop_worker(worker)
            raise ScriptError(f"{exc} while it ran the script; the next message gets a new one"
                              ) from None
        except ValueError:
            self._drop_worker(worker)
            raise ScriptError("the Python worker sent an answer that is not JSON") from None
        except BaseException:  # cancelled (the run stopped, a tool call timed out)
            self._drop_worker(worker)
            raise
        prints = answer.get("prints")
        if prints:
            self.log(str(prints))
        if not answer.get("ok"):
            raise ScriptError(str(answer.get("error") or "the script failed"))
        kind, value = answer.get("kind"), answer.get("value")
        if tool:
            if kind == "msg":
                self.result.set(msg, value.get("payload"))
            elif kind == "list":
                self.result.set(msg, [m.get("payload") for m in value])
            else:
                self.result.set(msg, None)
            return None
        if kind == "drop":
            return DROP
        if kind == "msg":
            msgid = msg.get("_msgid")
            msg.clear()
            msg.update(value)
            if msgid and "_msgid" not in msg:
                msg["_msgid"] = msgid
            return None
        seen: set[str] = set()
        for m in value:
            out = Message(m)
            if not out.get("_msgid") or out["_msgid"] in seen:
                out["_msgid"] = new_msgid()
            seen.add(out["_msgid"])
            self.send(out)
        return DROP


def _encode_request(msg: dict, args: Any) -> bytes:
    try:
        data = json.dumps({"msg": msg, "args": args}, ensure_ascii=False).encode(
            "utf-8", "surrogatepass") + b"\n"
    except (TypeError, ValueError) as exc:
        raise NodeConfigError(f"the message cannot be given to the script: {exc}") from None
    except RecursionError:
        raise NodeConfigError("the message cannot be given to the script: it is nested too "
                              "deeply") from None
    if len(data) > MAX_INPUT_BYTES:
        raise NodeConfigError(f"the message is {len(data)} bytes of JSON, more than the "
                              f"{MAX_INPUT_BYTES} a script may receive")
    return data


def _range_problem(name: str, value: Any, low: float, high: float) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{name} must be a number"
    if name == "timeout_seconds":
        if not low < value <= high:
            return f"{name} must be more than 0 and at most {high:g}"
        return None
    if not low <= value <= high:
        return f"{name} must be between {low:g} and {high:g}"
    return None
