"""``switchboard package new|install|list``: write a working plugin package,
install one into the plugins folder, list what the host finds.

A new package holds one example node, its tests and its ``plugin.json``.
The Node.js template takes the SDK (``switchboard.js``) and the protocol
(``plugin.proto``) from the installed Switchboard at the moment it is
written, so the repository keeps one copy of each. Every write is atomic:
the package is made in a temp folder beside its place, then renamed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from ..paths import data_dir
from . import host, wire

NAME_RULE = "a lower-case letter, then up to 63 lower-case letters, digits, '-' or '_'"
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
LANGUAGES = ("python", "node")
#: Not copied by ``install``: what is rebuilt on demand or is no part of the package.
SKIP = (".git", "__pycache__", ".pytest_cache")
#: The bundled Node.js package whose SDK and npm versions a node package takes.
JS_REFERENCE = "textkit-js"


class PackageError(Exception):
    """A package cannot be made or installed; the text says why and where."""


# -- new ---------------------------------------------------------------------
def new_package(name: str, lang: str, where: Path) -> Path:
    """Write the package ``where/name`` in ``lang``; its folder."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PackageError(f"package name {name!r}: must be {NAME_RULE}")
    if lang not in LANGUAGES:
        raise PackageError(f"--lang {lang!r}: must be one of {', '.join(LANGUAGES)}")
    folder = Path(where) / name
    if folder.is_symlink() or (folder.exists() and (not folder.is_dir() or any(folder.iterdir()))):
        raise PackageError(f"{folder}: already exists and is not empty; pick another "
                           "name or --dir")
    files = _python_files(name) if lang == "python" else _node_files(name)
    _write_atomically(folder, files)
    return folder


def next_steps(folder: Path, lang: str) -> list[str]:
    """What to do after ``new``, as shell lines to show the author."""
    name = folder.name
    if lang == "node":
        return [f"cd {folder}",
                "npm install                      # its two gRPC packages; install copies "
                "node_modules along",
                "npm test",
                "switchboard package install .",
                f"switchboard nodes | grep {name}"]
    return [f"cd {folder}",
            "python -m pytest tests           # the Python that runs Switchboard",
            "switchboard package install .",
            f"switchboard nodes | grep {name}"]


def module_name(name: str) -> str:
    """The Python module of a package: ``acme-tools`` -> ``acme_tools``."""
    return name.replace("-", "_")


def _write_atomically(folder: Path, files: dict[str, str | bytes]) -> None:
    parent = folder.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise PackageError(f"{parent}: cannot write there: {exc.strerror or exc}") from None
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would keep it private
        for rel, content in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        if folder.is_dir():
            folder.rmdir()  # empty (checked); rename will not replace a folder
        os.rename(tmp, folder)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PackageError(f"{folder}: could not be written: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fill(text: str, name: str) -> str:
    module = module_name(name)
    title = name.replace("-", " ").replace("_", " ").capitalize()
    return (text.replace("__NAME__", name).replace("__MODULE__", module)
            .replace("__TITLE__", title))


def _python_files(name: str) -> dict[str, str | bytes]:
    module = module_name(name)
    spec = importlib.util.find_spec(module)
    if module in sys.stdlib_module_names or (spec is not None and spec.origin is not None):
        # The plugin runs with its folder first on sys.path, and so do its
        # tests: the package would shadow a module of the same name that
        # they need (a bare folder, a namespace package, shadows nothing).
        raise PackageError(f"package name {name!r}: a Python module '{module}' already "
                           "exists; pick another name")
    manifest = {"name": name, "version": "0.1.0", "language": "python",
                "description": f"The {name} node package",
                "command": ["python", "-m", "runtime.plugin", "serve", module, "--name", name]}
    return {
        "plugin.json": json.dumps(manifest, indent=2) + "\n",
        f"{module}/__init__.py": _fill(PY_NODES, name),
        f"tests/test_{module}.py": _fill(PY_TESTS, name),
        "README.md": _fill(PY_README, name),
    }


def _reference_js() -> Path:
    """The bundled Node.js package of the installed Switchboard."""
    spec = importlib.util.find_spec("nodes")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(root) / JS_REFERENCE
        if (folder / "switchboard.js").is_file():
            return folder
    raise PackageError(f"the Node.js SDK (nodes/{JS_REFERENCE}/switchboard.js) is not in "
                       "this Switchboard installation, so a node package cannot be made")


def _node_files(name: str) -> dict[str, str | bytes]:
    ref = _reference_js()
    try:
        sdk = (ref / "switchboard.js").read_bytes()
        proto = wire.PROTO_PATH.read_bytes()
        deps = json.loads((ref / "package.json").read_text(encoding="utf-8"))["dependencies"]
        versions = {dep: deps[dep] for dep in ("@grpc/grpc-js", "@grpc/proto-loader")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PackageError(f"the Node.js SDK files of this Switchboard cannot be read "
                           f"({ref}, {wire.PROTO_PATH}): {exc}") from None
    manifest = {"name": name, "version": "0.1.0", "language": "node",
                "description": f"The {name} node package", "command": ["node", "index.js"]}
    package = {"name": f"switchboard-{name}", "version": "0.1.0", "private": True,
               "description": f"The {name} node package for Switchboard",
               "main": "index.js", "scripts": {"test": "node --test"},
               "engines": {"node": ">=18"}, "dependencies": versions}
    return {
        "plugin.json": json.dumps(manifest, indent=2) + "\n",
        "package.json": json.dumps(package, indent=2) + "\n",
        "switchboard.js": sdk,
        "plugin.proto": proto,
        "index.js": _fill(JS_INDEX, name),
        f"test/{name}.test.js": _fill(JS_TEST, name),
        "README.md": _fill(JS_README, name),
    }


# -- install -----------------------------------------------------------------
def install(path: Path, *, force: bool = False) -> Path:
    """Copy the package at ``path`` into the plugins folder; where it went."""
    src = Path(path).resolve()
    if not src.is_dir():
        raise PackageError(f"{path}: not a package folder")
    manifest_path = src / host.MANIFEST
    if not manifest_path.is_file():
        raise PackageError(f"{manifest_path}: not found; a package folder has a "
                           f"{host.MANIFEST} (switchboard package new makes one)")
    try:
        manifest = host.read_manifest(manifest_path)
    except ValueError as exc:
        raise PackageError(str(exc)) from None
    plugins = data_dir() / "plugins"
    target = plugins / manifest.name
    if src == target.resolve() or target.resolve() in src.parents:
        raise PackageError(f"{src}: is already in the plugins folder")
    if (target.exists() or target.is_symlink()) and not force:
        raise PackageError(f"{target}: '{manifest.name}' is already installed; "
                           "--force replaces it")
    try:
        staging = plugins / ".staging"  # one level below */plugin.json: never found as a plugin
        staging.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{manifest.name}.", dir=staging))
    except OSError as exc:
        raise PackageError(f"{plugins}: cannot write there: {exc.strerror or exc}") from None
    new = tmp / "new"
    try:
        shutil.copytree(src, new, symlinks=True, ignore=shutil.ignore_patterns(*SKIP))
        _anchor_links(src, new)
        if target.exists() or target.is_symlink():
            old = tmp / "old"
            os.rename(target, old)
            try:
                os.rename(new, target)
            except OSError:
                os.rename(old, target)
                raise
        else:
            os.rename(new, target)
    except (OSError, shutil.Error) as exc:
        raise PackageError(f"{src}: could not be installed into {target}: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            staging.rmdir()  # unless another install is under way
        except OSError:
            pass
    try:  # its nodes are read again on next use
        host.cache_path(host.Plugin(manifest, target, str(target))).unlink(missing_ok=True)
    except OSError:
        pass
    return target


def _anchor_links(src: Path, copy: Path) -> None:
    """A relative symlink that leads out of the package would point
    elsewhere from the copy: it becomes absolute. Links inside stay relative."""
    for dirpath, dirnames, filenames in os.walk(copy):
        for entry in dirnames + filenames:
            link = Path(dirpath) / entry
            if not link.is_symlink():
                continue
            dest = os.readlink(link)
            if os.path.isabs(dest):
                continue
            original = src / link.relative_to(copy)
            resolved = Path(os.path.normpath(original.parent / dest))
            if resolved != src and src not in resolved.parents:
                link.unlink()
                os.symlink(resolved, link)


# -- list --------------------------------------------------------------------
def list_packages() -> list[str]:
    """One line per plugin package found: name, version, language and where
    from; then what could not be read, as warnings."""
    plugins, errors = host.find_plugins()
    rows = [(p.name, p.manifest.version, p.manifest.language or "?", p.origin) for p in plugins]
    lines = []
    if rows:
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [f"{n:<{widths[0]}}  {v:<{widths[1]}}  {lang:<{widths[2]}}  {origin}"
                 for n, v, lang, origin in rows]
    else:
        lines.append(f"no plugin packages (install one into {data_dir() / 'plugins'} with "
                     "switchboard package install PATH)")
    lines += [f"warning: {err}" for err in errors]
    from importlib.metadata import entry_points

    # What a flow may run out of process (settings.out_of_process) by name.
    in_process = sorted({ep.name for ep in entry_points(group="switchboard.nodes")})
    if in_process:
        lines.append(f"in-process packages (a flow may run any of them out of process): "
                     f"{', '.join(in_process)}")
    return lines


# -- the Python template -----------------------------------------------------
PY_NODES = '''\
"""The __NAME__ node package: its nodes, written with Switchboard's node API.

Served in its own process by ``python -m runtime.plugin serve __MODULE__``
(plugin.json says so); the code is the same as for an in-process package.
"""

from __future__ import annotations

from runtime.node import AI, CUSTOM, MESSAGE, Node, NodeConfigError, Output, Param, Tool, node

MAX_WHO = 200


@node("__NAME__.greet", name="Greet", category="__TITLE__",
      tool=Tool("__MODULE___greet", "Greet someone by name"))
class Greet(Node):
    """Greets someone by name: "Hello, Ada!". In a flow it reads the name
    from the payload; wired to an agent's tools port, the LLM supplies it."""

    who = Param(str, "Who to greet", scope=MESSAGE, allow=AI | CUSTOM | MESSAGE,
                path="payload")
    greeting = Param(str, "The word of greeting", default="Hello", allow=CUSTOM)
    text = Output(str, "The greeting")

    def on_message(self, msg):
        who = " ".join(str(self.who.get(msg) or "").split()) or "world"
        if len(who) > MAX_WHO:
            # The text of a NodeConfigError is what the user and the LLM read.
            raise NodeConfigError(f"param 'who': at most {MAX_WHO} characters")
        self.text.set(msg, f"{self.greeting.get(msg)}, {who}!")
'''

PY_TESTS = '''\
"""The __NAME__ package's tests: the node's logic in process, and a round trip
through its own plugin process, started the way Switchboard starts it.

Run with the Python that runs Switchboard: ``python -m pytest tests``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE))  # the package's module, without installing it

from runtime.message import MESSAGE_TYPE, PARAMETERS, TOOL_DATA, TOOL_REQUEST, Message  # noqa: E402
from runtime.node import NodeConfigError  # noqa: E402
from runtime.plugin import host  # noqa: E402
from runtime.spec import ParamValue, Scope  # noqa: E402

from __MODULE__ import Greet  # noqa: E402


def test_greets_the_payload():
    msg = Message({"payload": "Ada"})
    assert Greet("greet").on_message(msg) is None  # None: the message goes on to "out"
    assert msg["payload"] == "Hello, Ada!"


def test_greets_as_a_tool():
    node = Greet("greet", params={"who": ParamValue(scope=Scope.AI),
                                  "greeting": ParamValue(scope=Scope.CUSTOM, value="Hi")})
    msg = Message({MESSAGE_TYPE: TOOL_REQUEST, PARAMETERS: {"who": "Grace"}})
    node.on_message(msg)
    assert msg[TOOL_DATA] == {"text": "Hi, Grace!"}


def test_refuses_an_overlong_name():
    with pytest.raises(NodeConfigError, match="param 'who'"):
        Greet("greet").on_message(Message({"payload": "x" * 201}))


def test_round_trip_through_the_plugin_process():
    plugin = host.Plugin(host.read_manifest(PACKAGE / "plugin.json"), PACKAGE, "tests")
    process = host.process_for(plugin)
    try:
        _version, specs = process.describe()  # starts the process, shakes hands
        assert [s.type for s in specs] == ["__NAME__.greet"]
        assert process.pid != os.getpid()
        remote = host.remote_class(specs[0], process)

        async def call(msg):
            node = remote("greet", params={"greeting": ParamValue(scope=Scope.CUSTOM,
                                                                  value="Hi")})
            try:
                await node.on_message(msg)
            finally:
                await node.close()
            return msg

        assert asyncio.run(call(Message({"payload": "Ada"})))["payload"] == "Hi, Ada!"
        with pytest.raises(NodeConfigError, match="param 'who'"):
            asyncio.run(call(Message({"payload": "x" * 201})))
    finally:
        process.stop()
    assert not process.alive
'''

PY_README = '''\
# __NAME__

A Switchboard node package in Python, run in its own process as a plugin.

| file | what |
| --- | --- |
| `plugin.json` | the manifest: name, version, and the command that serves the package |
| `__MODULE__/__init__.py` | the nodes, written with Switchboard's node API (`@node`, `Param`, `Output`, `Tool`) |
| `tests/test___MODULE__.py` | the node's logic, and a round trip through the real plugin process |

## Try it

```bash
python -m pytest tests              # with the Python that runs Switchboard
switchboard package install .       # copies this folder into the plugins folder
switchboard nodes | grep __NAME__
```

`__NAME__.greet` is then in the palette and in flows like any node, marked as
a plugin. Wire it to an agent's `tools` port and set *Who* to AI: the LLM
calls it as the tool `__MODULE___greet`.

After editing the code, install again with `--force`: Switchboard reads the
package's nodes again on next use.

## Add a node

Declare another `@node` class in `__MODULE__/` (or a module it imports).
The host starts `python -m runtime.plugin serve __MODULE__` with this
folder as its working directory, in Switchboard's own Python, and asks it
for its nodes. Scopes, secrets and the checking of an LLM's arguments stay
in Switchboard: your node reads `self.param.get(msg)` and writes
`self.output.set(msg, value)`, as it would in process.
'''


# -- the Node.js template ----------------------------------------------------
JS_INDEX = '''\
'use strict';
// The __NAME__ node package: its nodes, served to Switchboard over gRPC.
// plugin.json starts it with `node index.js`; requiring this file only
// declares the nodes (the tests do that). switchboard.js is the SDK.

const sb = require('./switchboard');

const { AI, CUSTOM, MESSAGE } = sb;
const MAX_WHO = 200;

sb.node('__NAME__.greet', {
  name: 'Greet',
  category: '__TITLE__',
  description: 'Greets someone by name: "Hello, Ada!". In a flow it reads the name from the '
    + "payload; wired to an agent's tools port, the LLM supplies it.",
  tool: sb.tool('__MODULE___greet', 'Greet someone by name'),
  params: {
    who: sb.param('str', 'Who to greet',
      { scope: 'message', allow: AI | CUSTOM | MESSAGE, path: 'payload' }),
    greeting: sb.param('str', 'The word of greeting', { default: 'Hello', allow: CUSTOM }),
  },
  outputs: {
    text: sb.output('str', 'The greeting'),
  },
  onMessage(msg) {
    const who = String(this.who.get(msg) ?? '').split(/\\s+/).filter(Boolean).join(' ') || 'world';
    if (who.length > MAX_WHO) {
      // The text of a NodeConfigError is what the user and the LLM read.
      throw new sb.NodeConfigError(`param 'who': at most ${MAX_WHO} characters`);
    }
    this.text.set(msg, `${this.greeting.get(msg)}, ${who}!`);
  },
});

const PACKAGE = { name: '__NAME__', version: require('./package.json').version };

if (require.main === module) sb.serve(PACKAGE);

module.exports = { PACKAGE };
'''

JS_TEST = '''\
'use strict';
// The __NAME__ package's tests (npm test): the node's logic, and a round trip
// through its own process, started the way Switchboard starts it.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { once } = require('node:events');

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const sb = require('../switchboard');
require('../index');

const ROOT = path.resolve(__dirname, '..');
const PROTO = path.join(ROOT, 'plugin.proto');
const greet = sb.registry.get('__NAME__.greet');

// The host resolves message- and AI-scoped params and sends their values with
// each call: callNode's third argument plays that part here.
test('greets the payload', async () => {
  const out = await sb.callNode(greet.instantiate({ id: 'g' }), { payload: 'Ada' }, { who: 'Ada' });
  assert.deepEqual(out, { msg: { payload: 'Hello, Ada!' }, ports: null });
});

test('greets as a tool: the result goes to __tool_data__', async () => {
  const node = greet.instantiate({ id: 'g', params: { greeting: { scope: 'custom', value: 'Hi' } } });
  const request = { __message_type__: 'tool_request', __parameters__: { who: 'Grace' } };
  const out = await sb.callNode(node, request, { who: 'Grace' });
  assert.deepEqual(out.msg.__tool_data__, { text: 'Hi, Grace!' });
});

test('refuses an overlong name, naming the param', async () => {
  await assert.rejects(sb.callNode(greet.instantiate({ id: 'g' }), {}, { who: 'x'.repeat(201) }),
    { name: 'NodeConfigError', message: /param 'who'/ });
});

function unary(client, method, request, md) {
  return new Promise((resolve, reject) => {
    client[method](request, md, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

test('node index.js: handshake, Describe, Create, one call, exit when stdin closes',
  { timeout: 60_000 }, async () => {
    const child = spawn(process.execPath, ['index.js'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = once(child, 'exit');
    const [line] = await once(readline.createInterface({ input: child.stdout }), 'line');
    const hs = JSON.parse(line);
    assert.equal(hs.switchboard_plugin, 1);

    const def = protoLoader.loadSync(PROTO, { keepCase: true, longs: Number, enums: String, defaults: true });
    const Client = grpc.loadPackageDefinition(def).switchboard.plugin.v1.Plugin;
    const client = new Client(hs.address, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('x-switchboard-token', hs.token); // every call needs the process's token
    const json = (value) => Buffer.from(JSON.stringify(value));
    try {
      const described = await unary(client, 'Describe', { protocol: 1 }, md);
      assert.equal(described.name, '__NAME__');
      assert.deepEqual(JSON.parse(described.specs_json).map((s) => s.type), ['__NAME__.greet']);
      const created = await unary(client, 'Create', { instance: 'run1/greet/1', type: '__NAME__.greet',
        name: 'Greet', run: 'run1', params_json: json({}), outputs_json: json({ text: 'payload' }) }, md);
      assert.equal(created.error, '');

      // One stream carries every call; frames are matched by id.
      const stream = client.Channel(md);
      stream.write({ frames: [{ kind: 'CALL', id: 1, instance: 'run1/greet/1',
        data: json({ msg: { payload: 'Ada' }, params: { who: 'Ada' } }) }] });
      const [batch] = await once(stream, 'data');
      const [frame] = batch.frames;
      assert.deepEqual([frame.kind, frame.id], ['RESULT', 1]);
      assert.deepEqual(JSON.parse(frame.data), { msg: { payload: 'Hello, Ada!' }, ports: null });
      const status = once(stream, 'status');
      stream.end();
      assert.equal((await status)[0].code, grpc.status.OK);
    } finally {
      grpc.Client.prototype.close.call(client); // client.close is the Close RPC
      child.stdin.end(); // as when Switchboard is gone: the plugin exits
    }
    const [code] = await exited;
    assert.equal(code, 0);
  });
'''

JS_README = '''\
# __NAME__

A Switchboard node package in JavaScript (Node.js 18 or later), run in its
own process as a plugin.

| file | what |
| --- | --- |
| `plugin.json` | the manifest: name, version, and the command that serves the package |
| `index.js` | the nodes |
| `switchboard.js` | the SDK: `node`, `param`, `output`, `tool`, `serve` (copied from Switchboard) |
| `plugin.proto` | the protocol it speaks (copied from Switchboard) |
| `test/__NAME__.test.js` | the node's logic, and a round trip through the real process |

## Try it

```bash
npm install                         # @grpc/grpc-js and @grpc/proto-loader
npm test
switchboard package install .       # copies this folder, node_modules too
switchboard nodes | grep __NAME__
```

`__NAME__.greet` is then in the palette and in flows like any node, marked as
a plugin. Wire it to an agent's `tools` port and set *Who* to AI: the LLM
calls it as the tool `__MODULE___greet`.

After editing the code, install again with `--force`: Switchboard reads the
package's nodes again on next use.
'''
