"""The Python node's worker program: the text a worker process runs
(``python -I -c WORKER_SOURCE``, started by ``nodes.core.code``), and the
same functions in this process (``_worker_module``) for the flow check's
compile and for the host's side of the sandbox.

The worker imports only the standard library, never Switchboard. It reads
JSON lines on stdin (first its configuration, then one request per
message) and answers one line each on stdout; on Linux it confines itself
(Landlock) when asked to, and a supervisor above it (``supervise``) keeps
every process a script starts in reach.
"""

from __future__ import annotations

from typing import Any

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


# -- Linux: the sandbox the worker puts itself in (Landlock) and the
# supervisor that keeps every process a script starts in reach.

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS and
# SECBIT_NO_CAP_AMBIENT_RAISE, each with its _LOCKED bit: root gains nothing
# back by exec.
SECURE_BITS = 0xFF
SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446


def libc():
    import ctypes

    lib = ctypes.CDLL(None, use_errno=True)
    lib.syscall.restype = ctypes.c_long
    lib.prctl.restype = ctypes.c_int
    return lib


def os_error(what):
    import ctypes

    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def prctl(lib, option, arg=0):
    import ctypes

    ulong = ctypes.c_ulong
    if lib.prctl(ctypes.c_int(option), ulong(arg), ulong(0), ulong(0), ulong(0)) != 0:
        raise os_error(f"prctl({option})")


def landlock_abi(lib):
    """The Landlock ABI version the kernel offers; 0: none."""
    import ctypes

    version = lib.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                          ctypes.c_uint32(1))
    return max(int(version), 0)


def drop_capabilities(lib):
    """No capability now or after an exec, even when Switchboard runs as
    root: a capability (CAP_DAC_READ_SEARCH's open_by_handle_at, a raw
    disk) would step around a rule on paths."""
    import ctypes

    with open("/proc/self/status") as fh:
        status = dict(line.split(":", 1) for line in fh if ":" in line)
    if int(status.get("CapEff", "0").strip(), 16) == 0 and \
            int(status.get("CapPrm", "0").strip(), 16) == 0 and os.getuid() != 0:
        return
    prctl(lib, PR_SET_SECUREBITS, SECURE_BITS)
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        prctl(lib, PR_CAPBSET_DROP, cap)
    try:
        prctl(lib, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # a kernel without ambient capabilities has none to clear

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two Data
    data = (Data * 2)()
    if lib.capset(ctypes.byref(header), data) != 0:
        raise os_error("capset")


def confine(denied):
    """Landlock: everything stays as it was except the folders in
    ``denied`` and what is in them, which cannot be opened, listed,
    executed, written, created or removed, by any path (a link, /proc/self/
    root) and by any process the script starts. Landlock only grants, so
    each folder on the way to a denied one is left out and every other entry
    in it is granted; a new entry there is out of reach as well. With ABI 6
    the script can neither signal processes outside (its supervisor, the
    host) nor reach their abstract UNIX sockets; with any ABI it cannot
    ptrace them (nor so read /proc/<pid>/environ or mem)."""
    import ctypes
    import stat

    lib = libc()
    abi = landlock_abi(lib)
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    file_rights = 1 | 2 | 4  # EXECUTE, WRITE_FILE, READ_FILE
    all_rights = (1 << 13) - 1  # ABI 1: those, READ_DIR and the REMOVE_/MAKE_ rights
    if abi >= 2:
        all_rights |= 1 << 13  # REFER
    if abi >= 3:
        all_rights |= 1 << 14  # TRUNCATE
        file_rights |= 1 << 14
    if abi >= 5:
        all_rights |= 1 << 15  # IOCTL_DEV
        file_rights |= 1 << 15

    class Ruleset(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64),
                    ("scoped", ctypes.c_uint64)]

    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

    scoped = 1 | 2 if abi >= 6 else 0  # ABSTRACT_UNIX_SOCKET, SIGNAL
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr = Ruleset(all_rights, 0, scoped)
    ruleset = lib.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                          ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise os_error("landlock_create_ruleset")
    try:
        denied = [os.path.realpath(d) for d in denied]

        def inside(path, folder):
            return path == folder or path.startswith(folder.rstrip("/") + "/")

        on_the_way = set()
        for folder in denied:
            path = folder
            while True:
                on_the_way.add(path)
                parent = os.path.dirname(path)
                if parent == path:
                    break
                path = parent
        for folder in sorted(on_the_way):
            if any(inside(folder, d) for d in denied):
                continue
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                path = os.path.join(folder, name)
                if path in on_the_way:
                    continue
                try:
                    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    mode = os.fstat(fd).st_mode
                    if stat.S_ISLNK(mode):
                        continue  # its target is granted, or not, where it is
                    rule = Beneath(all_rights if stat.S_ISDIR(mode) else file_rights, fd)
                    if lib.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                   ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0)):
                        raise os_error(f"landlock_add_rule({path})")
                finally:
                    os.close(fd)
        prctl(lib, PR_SET_NO_NEW_PRIVS, 1)
        drop_capabilities(lib)
        if lib.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset),
                       ctypes.c_uint32(0)):
            raise os_error("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def children_of(pid):
    """Process ids whose parent is ``pid`` (from /proc), a single-threaded
    process's (the supervisor, bubblewrap)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except OSError:
        pass  # a kernel without CONFIG_PROC_CHILDREN: look at every process
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def kill_descendants():
    """SIGKILL every process below this one and reap it. This process is a
    child subreaper, so whatever a script started and left (setsid, a double
    fork, nohup) is its child by the time its own parent is gone; the loop
    ends when no child at all is left."""
    import signal
    import time

    me = os.getpid()
    while True:
        killed = False
        for pid in children_of(me):
            try:
                os.kill(pid, signal.SIGKILL)
                killed = True
            except OSError:
                pass
        # A child just killed is about to end: wait for one. Otherwise a
        # child may be one that was reparented here after the look: a short
        # nap, then look again.
        flags = 0 if killed else os.WNOHANG
        while True:
            try:
                pid, _ = os.waitpid(-1, flags)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(0.002)
                break
            flags = os.WNOHANG


def supervise():
    """The worker process on Linux without bubblewrap: a child subreaper
    that forks the real worker, then waits. SIGTERM (the host: timeout, run
    end), the worker's end or the host's disappearance make it kill every
    process below it, then end with the worker's exit code."""
    import signal

    lib = libc()
    prctl(lib, PR_SET_CHILD_SUBREAPER, 1)
    parent = os.getppid()
    watched = {signal.SIGCHLD, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    me = os.getpid()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            prctl(lib, PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != me:
                os._exit(3)
            main()
            code = 0
        finally:
            os._exit(code)
    # The worker holds the pipes; this process keeps none of them open.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    code = 0
    while True:
        info = signal.sigtimedwait(watched, 0.5)
        if info is None:
            if os.getppid() != parent:
                break
            continue
        if info.si_signo == signal.SIGTERM:
            break
        done = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                done = True
                break
            if pid == 0:
                break
            if pid == child:
                code = os.waitstatus_to_exitcode(status)
                done = True
        if done:
            break
    kill_descendants()
    os._exit(code if code >= 0 else 128 - code)


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
    if config.get("confine"):
        try:
            confine(config["confine"])
        except Exception as exc:  # never run a script outside the sandbox it was meant for
            answer({"ready": False, "sandbox_error": f"{type(exc).__name__}: {exc}"})
            return
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
    if sys.argv[1:] == ["supervise"]:
        supervise()
    else:
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
