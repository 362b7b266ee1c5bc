"""``core.python``: a Python function body over ``msg``, run in a worker
process of its own.

Each node gets one worker per run: a ``python -I`` subprocess started in
``start()``, kept warm between messages, killed when the run ends. Host and
worker speak JSON lines over the worker's stdin and stdout: the first line
configures the worker (the script, the memory cap, the output bound), the
worker answers whether the script compiled, then it answers one line per
message. The worker imports nothing of Switchboard, so a script cannot reach
the engine or other nodes.

Nor the run's secrets or the credential store: the worker gets only the
environment variables the node lists (``env_vars``), and on Linux it runs in
bubblewrap (the data folder under an empty tmpfs, a PID namespace) or, where
bubblewrap does not work, confines itself with Landlock; with neither the
node refuses to start unless ``SWITCHBOARD_PYTHON_SANDBOX=off``. Whatever a
script starts (setsid, a double fork, nohup) is killed with the worker, at a
timeout and at the run's end: a PID namespace, or a supervisor that is a
child subreaper. docs/decisions.md says what a script can and cannot reach.

Bounds: a per-message time limit (past it the worker is killed; the next
message starts a new one), a memory cap (``RLIMIT_AS``, set by the worker on
itself), a bound on the size of what comes back, and on the printed text.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
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
from runtime.spec import Scope

from .code_sandbox import (
    DEFAULT_ENV_VARS,
    STARTUP_TIMEOUT,
    Sandbox,
    SandboxUnavailable,
    _scrubbed_env,
    env_var_names,
    sandbox,
)

# Re-exported: nodes.core.code.SANDBOX_ENV and the rest keep working.
from .code_sandbox import ENV_NAME as ENV_NAME
from .code_sandbox import MAX_ENV_VARS as MAX_ENV_VARS
from .code_sandbox import SANDBOX_ENV as SANDBOX_ENV
from .code_sandbox import SANDBOX_MODES as SANDBOX_MODES
from .code_sandbox import landlock_abi as landlock_abi
from .code_worker import WORKER_SOURCE, _worker_module

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
#: How long a supervised worker has to kill what its script started and end
#: before the host kills it outright.
KILL_GRACE = 5.0


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

    def __init__(self, code: str, memory_mb: int, max_output: int, *,
                 env_vars: list[str] | None = None, box: Sandbox | None = None) -> None:
        box = box if box is not None else sandbox()
        self.sandbox = box
        self.config = {"code": code, "memory_mb": memory_mb, "max_output": max_output,
                       "print_limit": PRINT_LIMIT,
                       "confine": list(box.hidden) if box.kind == "landlock" else None}
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
        names = env_var_names(DEFAULT_ENV_VARS) if env_vars is None else env_vars
        argv = [*box.prefix, sys.executable, "-I", "-c", WORKER_SOURCE]
        if box.supervised:
            argv.append("supervise")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            close_fds=True, env=_scrubbed_env(names), **kwargs)
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
        if hello.get("sandbox_error"):
            self.kill()
            raise SandboxUnavailable(f"the Python worker could not enter its sandbox "
                                     f"({self.sandbox.kind}): {hello['sandbox_error']}")
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
        """Kill the worker and every process its script started, wherever
        it went (its own session, a double fork); reap the worker."""
        if self.proc.poll() is None and self.sandbox.supervised:
            # The supervisor kills every process below it, then ends.
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=KILL_GRACE)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.sandbox.kind == "bwrap" and self.proc.poll() is None:
            # bubblewrap's child is the init of the sandbox's PID namespace.
            # Killed, it takes every process of the sandbox with it before
            # bubblewrap reaps it and ends; so once bubblewrap has ended,
            # nothing the script started is left.
            inner = _worker_module()["children_of"](self.proc.pid)
            for pid in inner:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if inner:
                try:
                    self.proc.wait(timeout=KILL_GRACE)
                except subprocess.TimeoutExpired:
                    pass
        if self.proc.poll() is None:
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
    env_vars = Param(str, "The environment variables the script may see, by name, separated by "
                     "spaces or commas. No other variable of Switchboard's reaches it (API keys, "
                     "passwords a flow reads from the environment)", default=DEFAULT_ENV_VARS,
                     allow=CUSTOM, group="advanced")

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
        env = params.get("env_vars")
        if env is not None and env.scope is not Scope.CUSTOM:
            problems.append(("env_vars", _ENV_FIXED))
        elif env is not None:
            try:
                env_var_names(env.value)
            except NodeConfigError as exc:
                problems.append(("env_vars", str(exc).removeprefix("env_vars: ")))
        return problems

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._worker: ScriptWorker | None = None
        self._problem: str | None = None  # the script does not compile: every message fails
        self._sandbox: Sandbox | None = None  # chosen at start, kept for the run's workers

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

    def _env_names(self) -> list[str]:
        if self.env_vars.scope is not Scope.CUSTOM:
            raise NodeConfigError(f"env_vars: {_ENV_FIXED}")
        return env_var_names(self.env_vars.get())

    def _new_worker(self, code: str, memory: int, output: int) -> ScriptWorker:
        return ScriptWorker(code, memory, output, env_vars=self._env_names(), box=self._sandbox)

    async def start(self) -> None:
        code, _, memory, output = self._settings()
        problem = script_problem(code)
        if problem:
            raise ScriptError(f"code: {problem}")
        self._env_names()
        # Once per run (the first run of a process tries bubblewrap once).
        self._sandbox = await run_in_thread(sandbox)
        # Started now, answered later: Python boots while the flow starts.
        self._worker = self._new_worker(code, memory, output)

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
            worker = self._worker = self._new_worker(code, memory, output)
        if worker.ready is None:
            try:
                hello = await asyncio.wait_for(run_in_thread(worker.wait_ready), STARTUP_TIMEOUT)
            except SandboxUnavailable:
                self._drop_worker(worker)
                raise
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


_ENV_FIXED = ("must be a fixed list of names: a template or a message would choose which "
              "environment variables a script sees")


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
