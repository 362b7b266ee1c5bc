'use strict';
/**
 * The Switchboard node SDK for JavaScript: declare nodes the way the Python
 * node API does (runtime/node.py) and serve them to a Switchboard host over
 * the gRPC plugin protocol (runtime/plugin/protos/.../plugin.proto).
 *
 *   const sb = require('./switchboard');
 *   sb.node('text.upper', {name: 'Upper', category: 'Text',
 *     params: {text: sb.param('str', 'The text', {scope: 'message', path: 'payload'})},
 *     outputs: {result: sb.output('str', 'The text in capitals')},
 *     onMessage(msg) { this.result.set(msg, String(this.text.get(msg)).toUpperCase()); }});
 *   sb.serve({name: 'mypackage', version: '0.1.0'});
 *
 * The host resolves message- and AI-scoped params (and secrets) and sends
 * their values with each call; a node only reads them with `param.get(msg)`.
 * Scope rules and argument validation stay in the host.
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { AsyncLocalStorage } = require('node:async_hooks');

const PROTOCOL = 1;

// Allow flags, as runtime.spec.Allow.
const CUSTOM = 1;
const MESSAGE = 2;
const AI = 4;
// Allow.scopes() order: ai, custom, message.
const FLAG_SCOPES = [[AI, 'ai'], [CUSTOM, 'custom'], [MESSAGE, 'message']];
const SCOPE_FLAG = { ai: AI, custom: CUSTOM, message: MESSAGE };
const PARAM_TYPES = new Set(['str', 'int', 'float', 'bool', 'json', 'enum', 'secret']);

/** Return this from onMessage to send nothing on. */
const DROP = Symbol('switchboard.DROP');

// Reserved message keys (runtime/message.py).
const MESSAGE_TYPE = '__message_type__';
const TOOL_DATA = '__tool_data__';
const TOOL_REQUEST = 'tool_request';

const MiB = 1024 * 1024;
/** Bounds on what one process accepts and keeps. */
const LIMITS = Object.freeze({
  frameBytes: 16 * MiB, // the JSON of one frame, either way
  grpcMessageBytes: 64 * MiB, // one Batch on the wire
  batchBytes: 1 * MiB, // a Batch being packed is sent once it reaches this
  inFlight: 4096, // calls being handled at once
  instances: 10000, // live node instances
  pendingFrames: 1000, // frames kept while no Channel is open
  errorChars: 4000, // an error's text
});

const LOG_LEVELS = new Set(['debug', 'info', 'warning', 'error']);

/** A node cannot do its job with the settings it was given; the text is
 * shown to the user (and to the LLM in tool mode), so it names the param. */
class NodeConfigError extends Error {
  constructor(message) {
    super(message);
    this.name = 'NodeConfigError';
  }
}

/** A dotted path that cannot be parsed or written (runtime.message.PathError). */
class PathError extends Error {
  constructor(message) {
    super(message);
    this.name = 'PathError';
  }
}

// -- paths (runtime/message.py) ----------------------------------------------

function isIndex(raw) {
  // Canonical ASCII numbers only ("01" is a key), and not past 18 digits.
  return /^(0|[1-9][0-9]{0,17})$/.test(raw);
}

// Parsed paths, kept: a node's params and outputs read and write the same
// few paths on every call (the parse was 3 % of a plugin's time, --cpu-prof).
const parsedPaths = new Map();
const PARSED_PATHS = 1000;

/** `payload.items.0.name` or `payload.items[0].name` -> parts (frozen: they
 * are shared); digit parts become numbers, which index lists and name the
 * key "0" in objects. */
function parsePath(p) {
  const known = parsedPaths.get(p);
  if (known !== undefined) return known;
  if (typeof p !== 'string') throw new PathError(`a path must be text, got ${typeof p}`);
  if (!p.trim()) throw new PathError('empty path');
  const parts = Object.freeze(p.replace(/\[/g, '.').replace(/\]/g, '').split('.').map((raw) => {
    if (raw === '') throw new PathError(`bad path '${p}': empty segment`);
    return isIndex(raw) ? Number(raw) : raw;
  }));
  if (parsedPaths.size < PARSED_PATHS) parsedPaths.set(p, parts);
  return parts;
}

const MISSING = Symbol('missing');

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// Own properties only, so that a path can never reach Object.prototype.
function step(container, part) {
  if (isObject(container)) {
    const key = String(part);
    return Object.prototype.hasOwnProperty.call(container, key) ? container[key] : MISSING;
  }
  if (Array.isArray(container) && typeof part === 'number') {
    return part < container.length ? container[part] : MISSING;
  }
  return MISSING;
}

function getPath(obj, p, dflt = null) {
  let cur = obj;
  for (const part of parsePath(p)) {
    cur = step(cur, part);
    if (cur === MISSING) return dflt;
  }
  return cur;
}

function assign(container, part, value, p) {
  if (isObject(container)) {
    // defineProperty: a key named "__proto__" is a key, not the prototype.
    Object.defineProperty(container, String(part),
      { value, writable: true, enumerable: true, configurable: true });
  } else if (Array.isArray(container) && typeof part === 'number') {
    if (part <= container.length) container[part] = value;
    else throw new PathError(`cannot set '${p}': index ${part} past the end of a list`);
  } else {
    const kind = container === null ? 'null' : Array.isArray(container) ? 'list' : typeof container;
    throw new PathError(`cannot set '${p}': ${kind} has no field '${part}'`);
  }
}

/** Set a value at a path, creating objects (or lists, before a number part). */
function setPath(obj, p, value) {
  const parts = parsePath(p);
  let cur = obj;
  for (let i = 0; i < parts.length - 1; i++) {
    let next = step(cur, parts[i]);
    if (next === MISSING || next === null || typeof next !== 'object') {
      next = typeof parts[i + 1] === 'number' ? [] : {};
      assign(cur, parts[i], next, p);
    }
    cur = next;
  }
  assign(cur, parts[parts.length - 1], value, p);
}

// -- declarations ------------------------------------------------------------

const ACRONYMS = {
  smtp: 'SMTP', url: 'URL', api: 'API', id: 'ID', http: 'HTTP', https: 'HTTPS', json: 'JSON',
  llm: 'LLM', ai: 'AI', starttls: 'STARTTLS', tls: 'TLS', ssl: 'SSL', imap: 'IMAP', sql: 'SQL',
  csv: 'CSV', dir: 'folder', uri: 'URI', ip: 'IP',
};

function isUpper(s) {
  // Python's str.isupper(): some cased character, and no lowercase one.
  return s !== s.toLowerCase() && s === s.toUpperCase();
}

/** A readable label from a param name, as runtime.node.label_for:
 * `smtp_host` -> "SMTP host", `base_url` -> "Base URL". */
function labelFor(name) {
  const words = name.split('_').filter(Boolean).map((w) => {
    const lower = w.toLowerCase();
    return Object.prototype.hasOwnProperty.call(ACRONYMS, lower) ? ACRONYMS[lower] : lower;
  });
  if (!words.length) return name;
  const first = words[0];
  if (!isUpper(first)) {
    const [head = '', ...rest] = Array.from(first);
    words[0] = head.toUpperCase() + rest.join('');
  }
  return words.join(' ');
}

function scopesOf(allow) {
  return FLAG_SCOPES.filter(([flag]) => allow & flag).map(([, scope]) => scope);
}

/** Declares that a node can serve as an LLM tool. */
function tool(name, description) {
  if (typeof name !== 'string' || !name) throw new TypeError('a tool needs a name');
  return Object.freeze({ name, description: String(description ?? '') });
}

const PARAM_OPTIONS = new Set(['default', 'optional', 'scope', 'allow', 'choices', 'label',
  'multiline', 'path', 'visible_if', 'group']);

/** A node parameter; the same defaults as runtime.node.Param. */
function param(type = 'str', description = '', opts = {}) {
  for (const key of Object.keys(opts)) {
    if (!PARAM_OPTIONS.has(key)) throw new TypeError(`unknown param option '${key}'`);
  }
  const choices = opts.choices ? Array.from(opts.choices, String) : null;
  const t = choices ? 'enum' : type;
  if (!PARAM_TYPES.has(t)) throw new TypeError(`unsupported param type '${type}'`);
  const secret = t === 'secret';
  let scope = opts.scope ?? null;
  if (typeof scope === 'number') scope = scopesOf(scope)[0];
  if (scope !== null && !Object.prototype.hasOwnProperty.call(SCOPE_FLAG, scope)) {
    throw new TypeError(`unknown scope '${scope}'`);
  }
  let allow = opts.allow;
  if (allow === undefined || allow === null) {
    allow = secret ? CUSTOM : CUSTOM | MESSAGE;
    // Naming a default scope is consent to it (param('str', '', {scope: 'ai'})).
    if (scope !== null) allow |= SCOPE_FLAG[scope];
  }
  if (!Number.isInteger(allow) || allow <= 0 || allow > (AI | CUSTOM | MESSAGE)) {
    throw new TypeError('allow must be a combination of AI, CUSTOM and MESSAGE');
  }
  // A secret names an env var or keyring entry fixed by the designer; letting
  // the AI or a message pick it would let them choose which secret leaks.
  if (secret && allow !== CUSTOM) throw new TypeError('a secret param allows only CUSTOM');
  scope = scope ?? (allow & CUSTOM ? 'custom' : scopesOf(allow)[0]);
  if (!(allow & SCOPE_FLAG[scope])) {
    throw new TypeError(`default scope '${scope}' is not in allow`);
  }
  const hasDefault = Object.prototype.hasOwnProperty.call(opts, 'default');
  return Object.freeze({
    kind: 'param',
    type: t,
    description: String(description),
    default: hasDefault ? opts.default : null,
    hasDefault,
    optional: Boolean(opts.optional),
    allow,
    scope,
    choices,
    label: opts.label ?? null,
    multiline: Boolean(opts.multiline),
    path: opts.path ?? null,
    // Shown only while other params' fixed values are among these: {delivery: ['smtp']}.
    visibleIf: opts.visible_if ?? null,
    // "" (main) or the collapsible section the designer shows it in.
    group: String(opts.group ?? ''),
  });
}

/** A named result of a node, written at its path in RPA mode and collected
 * into `__tool_data__` in tool mode. */
function output(type = 'json', description = '', opts = {}) {
  if (!PARAM_TYPES.has(type)) throw new TypeError(`unsupported output type '${type}'`);
  return Object.freeze({ kind: 'output', type, description: String(description), path: opts.path ?? null });
}

// -- node types and instances ------------------------------------------------

/** Per call: its id, the params the host resolved, where its frames go. */
const callContext = new AsyncLocalStorage();

const registry = new Map();
const HOOKS = ['onMessage', 'start', 'close', 'generate'];
const DEF_KEYS = new Set(['name', 'category', 'description', 'icon', 'color', 'tool', 'params',
  'outputs', 'inputs', 'outputPorts']);

/** Methods every instance has; params and outputs may not take their names. */
class NodeInstance {
  /** Send a message on a port (sources, or more than one message per call).
   * In tool mode nothing flows on from a node's outputs, so a send from a
   * tool call (or of a tool request) is ignored. */
  send(msg, port = 'out') {
    if (!isObject(msg)) throw new TypeError('send() needs a message object');
    const ctx = callContext.getStore();
    if (msg[MESSAGE_TYPE] === TOOL_REQUEST || (ctx && ctx.tool)) return;
    this._emit({ kind: 'SEND', id: ctx ? ctx.id : 0, port: String(port), data: msg });
  }

  debug(value, msg = null) {
    const msgid = isObject(msg) && typeof msg._msgid === 'string' ? msg._msgid : '';
    this._emit({ kind: 'DEBUG', data: { value: value === undefined ? null : value, msgid } });
  }

  status(text = '', color = '', state = 'idle') {
    this._emit({ kind: 'STATUS', data: { text: String(text), color: String(color), state: String(state) } });
  }

  log(text, level = 'info') {
    if (!LOG_LEVELS.has(level)) level = 'info';
    this._emit({ kind: 'LOG', data: { text: String(text), level } });
  }

  _emit(frame) {
    frame.instance = this.id;
    this._sink(frame, callContext.getStore());
  }
}

class BoundParam {
  constructor(name, decl, setting) {
    this.name = name;
    this.decl = decl;
    const s = isObject(setting) ? setting : {};
    this.scope = Object.prototype.hasOwnProperty.call(SCOPE_FLAG, s.scope) ? s.scope : decl.scope;
    this.value = this.scope === 'custom' && s.value !== undefined ? s.value : decl.default;
    this.path = s.path || decl.path || name;
  }

  /** The value the host resolved for this call; else the designer's fixed
   * (custom) value; else `dflt` if given; else the param's default. */
  get(msg, dflt) {
    const ctx = callContext.getStore();
    if (ctx && ctx.params && Object.prototype.hasOwnProperty.call(ctx.params, this.name)) {
      return ctx.params[this.name];
    }
    if (this.scope === 'custom' && this.value !== null && this.value !== undefined) return this.value;
    if (arguments.length >= 2) return dflt;
    return this.decl.default;
  }
}

class BoundOutput {
  constructor(name, p) {
    this.name = name;
    this.path = p;
  }

  set(msg, value) {
    if (msg[MESSAGE_TYPE] === TOOL_REQUEST) {
      if (!isObject(msg[TOOL_DATA])) msg[TOOL_DATA] = {};
      assign(msg[TOOL_DATA], this.name, value, this.name);
    } else {
      setPath(msg, this.path, value);
    }
  }
}

class NodeType {
  constructor(typeId, def) {
    for (const key of Object.keys(def)) {
      if (!DEF_KEYS.has(key) && typeof def[key] !== 'function') {
        throw new TypeError(`${typeId}: unknown node option '${key}'`);
      }
    }
    if (!def.name || !def.category) throw new TypeError(`${typeId}: a node needs a name and a category`);
    this.type = typeId;
    this.def = def;
    this.params = Object.entries(def.params ?? {});
    this.outputs = Object.entries(def.outputs ?? {});
    // The instance prototype: the SDK's methods, then the author's functions.
    this.proto = Object.create(NodeInstance.prototype);
    for (const [key, value] of Object.entries(def)) {
      if (typeof value === 'function') this.proto[key] = value;
    }
    const reserved = new Set(['id', 'name', 'type', 'run', 'spec', 'constructor', ...HOOKS,
      ...Object.getOwnPropertyNames(NodeInstance.prototype), ...Object.keys(this.proto)]);
    // Params and outputs become properties of the instance: one namespace.
    for (const [name] of [...this.params, ...this.outputs]) {
      if (reserved.has(name) || name.startsWith('_') || !/^[A-Za-z][A-Za-z0-9_]*$/.test(name)) {
        throw new TypeError(`${typeId}: '${name}' is reserved or not a name and cannot be a param`);
      }
      reserved.add(name);
    }
    for (const [name, decl] of this.params) {
      if (decl?.kind !== 'param') throw new TypeError(`${typeId}: params.${name} is not sb.param(...)`);
    }
    for (const [name, decl] of this.outputs) {
      if (decl?.kind !== 'output') throw new TypeError(`${typeId}: outputs.${name} is not sb.output(...)`);
    }
  }

  /** The spec, key for key as runtime.spec.NodeSpec dumps it. */
  spec(packageName = '') {
    const d = this.def;
    return {
      type: this.type,
      name: String(d.name),
      category: String(d.category),
      description: String(d.description ?? ''),
      icon: String(d.icon ?? ''),
      color: String(d.color ?? ''),
      inputs: (d.inputs ?? ['in']).map((n) => ({ name: n, label: '', kind: 'in' })),
      outputs: (d.outputPorts ?? ['out']).map((n) => ({ name: n, label: '', kind: 'out' })),
      dynamic_outputs: false,
      params: this.params.map(([name, p]) => ({
        name,
        type: p.type,
        label: p.label ?? labelFor(name),
        description: p.description,
        default: p.default,
        has_default: p.hasDefault,
        optional: p.optional,
        allowed_scopes: scopesOf(p.allow),
        default_scope: p.scope,
        choices: p.choices,
        secret: p.type === 'secret',
        multiline: p.multiline,
        default_path: p.path,
        visible_if: p.visibleIf,
        group: p.group,
      })),
      results: this.outputs.map(([name, o], i) => ({
        name,
        type: o.type,
        description: o.description,
        path: o.path ?? (i === 0 ? 'payload' : name),
      })),
      tool: d.tool ? { name: d.tool.name, description: d.tool.description } : null,
      source: typeof d.generate === 'function',
      package: packageName,
      plugin: '', // the host marks its specs with the plugin's name
    };
  }

  /** A node instance with the flow's settings: params name -> {scope, value,
   * path}, outputs name -> path. `sink(frame, callContext)` takes what it emits. */
  instantiate({ id, name = '', run = '', params = {}, outputs = {}, sink = () => {} }) {
    const inst = Object.create(this.proto);
    Object.defineProperties(inst, {
      id: { value: String(id), enumerable: true },
      name: { value: name || String(this.def.name), enumerable: true },
      type: { value: this.type, enumerable: true },
      run: { value: String(run), enumerable: true },
      _sink: { value: sink },
    });
    for (const [pname, decl] of this.params) inst[pname] = new BoundParam(pname, decl, params[pname]);
    this.outputs.forEach(([oname, o], i) => {
      const p = (typeof outputs[oname] === 'string' && outputs[oname]) || o.path || (i === 0 ? 'payload' : oname);
      inst[oname] = new BoundOutput(oname, p);
    });
    return inst;
  }
}

/** Declare a node type; see the module comment. */
function node(typeId, def) {
  if (typeof typeId !== 'string' || !/^[A-Za-z0-9_.-]+$/.test(typeId)) {
    throw new TypeError(`bad node type id '${typeId}'`);
  }
  if (registry.has(typeId)) throw new TypeError(`node type '${typeId}' is declared twice`);
  const type = new NodeType(typeId, def);
  registry.set(typeId, type);
  return type;
}

function specs(packageName) {
  return [...registry.values()].map((t) => t.spec(packageName));
}

/** What onMessage's return value means: null (on to "out"), [] (DROP) or ports. */
function portsOf(ret) {
  if (ret === undefined || ret === null) return null;
  if (ret === DROP) return [];
  if (typeof ret === 'string') return [ret];
  if (Array.isArray(ret) && ret.every((p) => typeof p === 'string')) return ret;
  throw new TypeError('onMessage must return nothing, sb.DROP, a port name or a list of port names');
}

function errorData(err) {
  const isErr = err instanceof Error;
  let message = isErr ? err.message : String(err);
  if (message.length > LIMITS.errorChars) message = `${message.slice(0, LIMITS.errorChars)}…`;
  return {
    message,
    config: err instanceof NodeConfigError,
    type: isErr ? (err.name || err.constructor?.name || 'Error') : typeof err,
  };
}

/**
 * Run one call of an instance's hook ('onMessage' with a message, or
 * 'generate') and settle with {kind: 'RESULT', data} or {kind: 'ERROR', data}.
 * A plain function's result is taken at once; a Promise is awaited.
 */
function runHook(inst, hook, msg, ctx, settle) {
  const done = (ret) => {
    if (hook === 'generate') return settle({ kind: 'RESULT', data: { msg: {}, ports: [] } });
    let ports;
    try {
      ports = portsOf(ret);
    } catch (err) {
      return settle({ kind: 'ERROR', data: errorData(err) });
    }
    return settle({ kind: 'RESULT', data: { msg, ports } });
  };
  const fail = (err) => settle({ kind: 'ERROR', data: errorData(err) });
  let ret;
  try {
    const fn = inst[hook];
    if (typeof fn !== 'function') {
      throw new Error(hook === 'generate' ? `${inst.type} is not a source` : `${inst.type} has no ${hook}`);
    }
    const info = new CallInfo(ctx);
    ctx.tool = isObject(msg) && msg[MESSAGE_TYPE] === TOOL_REQUEST;
    ret = callContext.run(ctx, () => (hook === 'generate' ? fn.call(inst, info) : fn.call(inst, msg, info)));
  } catch (err) {
    return fail(err);
  }
  if (ret && typeof ret.then === 'function') Promise.resolve(ret).then(done, fail);
  else done(ret);
}

/** A call made by hand, as the plugin runs one: for tests of a node's logic.
 * Resolves to {msg, ports} or rejects with the node's error. */
function callNode(inst, msg, params = {}, { id = 1, signal } = {}) {
  return new Promise((resolve, reject) => {
    runHook(inst, 'onMessage', msg, { id, params, signal: signal ?? new AbortController().signal },
      (out) => {
        if (out.kind === 'RESULT') return resolve(out.data);
        const err = out.data.config ? new NodeConfigError(out.data.message) : new Error(out.data.message);
        err.name = out.data.type;
        return reject(err);
      });
  });
}

// -- the plugin server -------------------------------------------------------

function findProto() {
  const candidates = [
    process.env.SWITCHBOARD_PLUGIN_PROTO,
    path.join(__dirname, 'plugin.proto'),
    // The package inside a Switchboard checkout (nodes/textkit-js).
    path.join(__dirname, '..', '..', 'runtime', 'plugin', 'protos', 'switchboard', 'plugin', 'v1', 'plugin.proto'),
  ].filter(Boolean);
  for (const file of candidates) {
    if (fs.existsSync(file)) return file;
  }
  throw new Error(`plugin.proto not found (tried ${candidates.join(', ')}); set SWITCHBOARD_PLUGIN_PROTO`);
}

function loadService(grpc) {
  const protoLoader = require('@grpc/proto-loader');
  const definition = protoLoader.loadSync(findProto(), {
    keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).switchboard.plugin.v1.Plugin.service;
}

function parseJsonObject(buf, what) {
  if (!buf || buf.length === 0) return {};
  if (buf.length > LIMITS.frameBytes) throw new Error(`${what}: ${buf.length} bytes, over the limit of ${LIMITS.frameBytes}`);
  const value = JSON.parse(buf.toString('utf8'));
  if (!isObject(value)) throw new Error(`${what} must be a JSON object`);
  return value;
}

/** A call in flight, which a CANCEL (or its Channel closing) aborts. Its
 * AbortSignal is made when the node first asks for it: an AbortController
 * costs more than the rest of a small call's bookkeeping (3 % of the
 * process's time at 16 calls in flight, --cpu-prof), and most nodes never
 * look at it. One asked for after the abort is aborted already. */
class CallEntry {
  constructor() {
    this.controller = null;
    this.aborted = false;
  }

  get signal() {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort();
    }
    return this.controller.signal;
  }

  abort() {
    if (this.aborted) return;
    this.aborted = true;
    if (this.controller !== null) this.controller.abort();
  }
}

/** What a call's code can reach through callContext (send, status, log and
 * params find their call and Channel in it). */
class CallContext {
  constructor(id, params, channel, entry) {
    this.id = id;
    this.params = params;
    this.channel = channel;
    this.entry = entry;
    this.tool = false;
  }

  get signal() {
    return this.entry.signal;
  }
}

/** The second argument of onMessage(msg, {id, signal}) and generate({id,
 * signal}). `signal` is a getter on the class: an object literal with a
 * getter costs V8 more than the AbortController it would save. */
class CallInfo {
  #ctx;

  constructor(ctx) {
    this.id = ctx.id;
    this.#ctx = ctx;
  }

  get signal() {
    return this.#ctx.signal;
  }
}

/** Frames to one Channel stream, packed into Batches: frames that become
 * ready in the same turn of the event loop leave together. */
class Outbox {
  constructor(stream) {
    this.stream = stream;
    this.frames = [];
    this.bytes = 0;
    this.scheduled = false;
    this.open = true;
    this.flush = this.flush.bind(this);
  }

  push(frame) {
    if (!this.open) return;
    this.frames.push(frame);
    this.bytes += frame.data.length;
    if (this.bytes >= LIMITS.batchBytes) {
      this.flush();
    } else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flush);
    }
  }

  flush() {
    this.scheduled = false;
    if (!this.frames.length || !this.open) return;
    const frames = this.frames;
    this.frames = [];
    this.bytes = 0;
    this.stream.write({ frames });
  }
}

/** Encode a frame's data as JSON within the frame limit; a result that cannot
 * be sent becomes an ERROR, a debug value too big becomes a note. */
function encodeFrame(frame) {
  const out = { kind: frame.kind, id: frame.id ?? 0, instance: frame.instance ?? '', port: frame.port ?? '' };
  let json;
  try {
    json = JSON.stringify(frame.data);
    if (json === undefined) throw new TypeError('not JSON');
  } catch (err) {
    if (frame.kind === 'DEBUG') {
      json = JSON.stringify({ value: String(frame.data.value), msgid: frame.data.msgid });
    } else {
      return encodeFrame({ ...frame, kind: 'ERROR', data: { message: `the ${frame.kind.toLowerCase()} is not JSON: ${err.message}`, config: false, type: 'TypeError' } });
    }
  }
  const data = Buffer.from(json, 'utf8');
  if (data.length > LIMITS.frameBytes) {
    const note = `${frame.kind.toLowerCase()} of ${data.length} bytes, over the frame limit of ${LIMITS.frameBytes}`;
    if (frame.kind === 'DEBUG') {
      return encodeFrame({ ...frame, data: { value: `<${note}>`, msgid: frame.data.msgid } });
    }
    if (frame.kind === 'ERROR') {
      return encodeFrame({ ...frame, data: { ...frame.data, message: frame.data.message.slice(0, LIMITS.errorChars) } });
    }
    return encodeFrame({ ...frame, kind: 'ERROR', data: { message: `the ${note}`, config: false, type: 'ValueError' } });
  }
  out.data = data;
  return out;
}

/**
 * The gRPC server of one plugin process, not yet bound to stdin/stdout:
 * `serve()` adds the handshake and the process life cycle. Tests may run it
 * in their own process.
 */
class PluginServer {
  constructor({ name, version = '0.0.0', token = crypto.randomBytes(16).toString('hex') }) {
    if (!name) throw new TypeError('serve() needs the package name');
    this.grpc = require('@grpc/grpc-js');
    this.name = String(name);
    this.version = String(version);
    this.token = token;
    this.instances = new Map();
    this.channels = new Set(); // open Channel streams; the newest takes unsolicited frames
    this.pending = []; // frames emitted while no Channel is open
    this.inFlight = 0;
    this.server = null;
  }

  /** Bind to `address` ("unix:/path" or "127.0.0.1:0"); resolves to the address. */
  start(address) {
    const grpc = this.grpc;
    const service = loadService(grpc);
    this.server = new grpc.Server({
      'grpc.max_receive_message_length': LIMITS.grpcMessageBytes,
      'grpc.max_send_message_length': LIMITS.grpcMessageBytes,
      interceptors: [this.authInterceptor()],
    });
    const unary = (fn) => (call, callback) => {
      Promise.resolve().then(() => fn(call.request)).then(
        (reply) => callback(null, reply),
        (err) => callback({ code: grpc.status.INTERNAL, details: errorData(err).message }));
    };
    this.server.addService(service, {
      Describe: unary(() => this.describe()),
      Create: unary((req) => this.create(req)),
      Close: unary((req) => this.close(req)),
      Health: unary(() => this.health()),
      Channel: (call) => this.channel(call),
    });
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) return reject(err);
        return resolve(address.startsWith('unix:') ? address : address.replace(/:0$/, `:${port}`));
      });
    });
  }

  /** Every RPC, the Channel stream included, must carry the token. */
  authInterceptor() {
    const grpc = this.grpc;
    const expected = Buffer.from(this.token, 'utf8');
    const valid = (metadata) => {
      const got = metadata.get('x-switchboard-token');
      if (got.length !== 1) return false;
      const given = Buffer.from(String(got[0]), 'utf8');
      return given.length === expected.length && crypto.timingSafeEqual(given, expected);
    };
    return (methodDescriptor, call) => {
      const listener = new grpc.ServerListenerBuilder()
        .withOnReceiveMetadata((metadata, next) => {
          if (valid(metadata)) next(metadata);
          else call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: 'missing or wrong x-switchboard-token' });
        })
        .build();
      const responder = new grpc.ResponderBuilder().withStart((next) => next(listener)).build();
      return new grpc.ServerInterceptingCall(call, responder);
    };
  }

  describe() {
    return {
      protocol: PROTOCOL,
      name: this.name,
      version: this.version,
      language: 'node',
      specs_json: Buffer.from(JSON.stringify(specs(this.name)), 'utf8'),
    };
  }

  async create(req) {
    try {
      if (!req.instance) throw new Error('an instance needs an id');
      if (this.instances.has(req.instance)) throw new Error(`instance '${req.instance}' exists already`);
      if (this.instances.size >= LIMITS.instances) throw new Error(`too many node instances (limit ${LIMITS.instances})`);
      const type = registry.get(req.type);
      if (!type) throw new Error(`package '${this.name}' has no node type '${req.type}'`);
      const inst = type.instantiate({
        id: req.instance,
        name: req.name,
        run: req.run,
        params: parseJsonObject(req.params_json, 'params_json'),
        outputs: parseJsonObject(req.outputs_json, 'outputs_json'),
        sink: (frame, ctx) => this.emit(frame, ctx),
      });
      this.instances.set(req.instance, inst); // taken, while start() runs
      try {
        if (typeof inst.start === 'function') {
          await callContext.run({ id: 0, params: null, channel: null }, () => inst.start());
        }
      } catch (err) {
        this.instances.delete(req.instance);
        throw err;
      }
      return { error: '' };
    } catch (err) {
      return { error: errorData(err).message };
    }
  }

  /** Idempotent: closing an instance that is not there is not an error. */
  async close(req) {
    const inst = this.instances.get(req.instance);
    if (!inst) return { error: '' };
    this.instances.delete(req.instance);
    try {
      if (typeof inst.close === 'function') {
        await callContext.run({ id: 0, params: null, channel: null }, () => inst.close());
      }
      return { error: '' };
    } catch (err) {
      return { error: errorData(err).message };
    }
  }

  health() {
    return { status: 'serving', instances: this.instances.size, in_flight: this.inFlight, pid: process.pid };
  }

  /** Route a frame an instance emitted: to the Channel its call came in on,
   * else to the newest open Channel, else keep it (bounded) until one opens. */
  emit(frame, ctx) {
    const ch = (ctx && ctx.channel && ctx.channel.outbox.open) ? ctx.channel : this.newestChannel();
    if (ch) {
      ch.outbox.push(encodeFrame(frame));
      return;
    }
    if (this.pending.length >= LIMITS.pendingFrames) this.pending.shift();
    this.pending.push(frame);
  }

  newestChannel() {
    let last = null;
    for (const ch of this.channels) last = ch;
    return last;
  }

  channel(call) {
    const ch = { call, outbox: new Outbox(call), calls: new Map() };
    this.channels.add(ch);
    for (const frame of this.pending.splice(0)) ch.outbox.push(encodeFrame(frame));
    const reply = (kind, id, data) => ch.outbox.push(encodeFrame({ kind, id, data }));
    call.on('data', (batch) => {
      for (const frame of batch.frames ?? []) {
        try {
          this.handleFrame(ch, frame);
        } catch (err) {
          // A bad frame costs that frame only, never the process.
          reply('ERROR', Number(frame.id) || 0, errorData(err));
        }
      }
    });
    const finish = () => {
      if (!this.channels.delete(ch)) return;
      ch.outbox.open = false;
      for (const entry of ch.calls.values()) entry.abort();
      this.inFlight -= ch.calls.size;
      ch.calls.clear();
    };
    call.on('end', () => {
      // The host half-closed: what is ready goes out, calls still running are dropped.
      ch.outbox.flush();
      finish();
      call.end();
    });
    call.on('error', finish);
    call.on('cancelled', finish);
    call.on('close', finish);
  }

  handleFrame(ch, frame) {
    const id = Number(frame.id) || 0;
    switch (frame.kind) {
      case 'CALL':
      case 'GENERATE': {
        const inst = this.instances.get(frame.instance);
        if (!inst) throw new Error(`no instance '${frame.instance}'`);
        if (ch.calls.has(id)) throw new Error(`call ${id} is already running`);
        if (this.inFlight >= LIMITS.inFlight) throw new Error(`too many calls in flight (limit ${LIMITS.inFlight})`);
        let msg = null;
        let params = {};
        if (frame.kind === 'CALL') {
          const data = parseJsonObject(frame.data, 'CALL data');
          if (!isObject(data.msg)) throw new Error('CALL data needs {"msg": {...}}');
          if (data.params !== undefined && data.params !== null && !isObject(data.params)) {
            throw new Error('CALL params must be a JSON object');
          }
          msg = data.msg;
          params = data.params ?? {};
        }
        this.startCall(ch, id, inst, frame.kind === 'CALL' ? 'onMessage' : 'generate', msg, params);
        return;
      }
      case 'CANCEL': {
        const entry = ch.calls.get(id);
        if (!entry) return; // finished already, or never known: nothing to drop
        ch.calls.delete(id);
        this.inFlight -= 1;
        entry.abort();
        return;
      }
      default:
        throw new Error(`a plugin does not take ${frame.kind} frames`);
    }
  }

  startCall(ch, id, inst, hook, msg, params) {
    const entry = new CallEntry();
    ch.calls.set(id, entry);
    this.inFlight += 1;
    const ctx = new CallContext(id, params, ch, entry);
    runHook(inst, hook, msg, ctx, (out) => {
      // A cancelled call (or one of a closed Channel) has no one to answer.
      if (ch.calls.get(id) !== entry) return;
      ch.calls.delete(id);
      this.inFlight -= 1;
      ch.outbox.push(encodeFrame({ kind: out.kind, id, instance: inst.id, data: out.data }));
    });
  }

  /** close() every live instance, waiting at most `waitMs` for them all. */
  async closeAll(waitMs = 1000) {
    const closing = [...this.instances.keys()].map((instance) => this.close({ instance }));
    let timer;
    const bound = new Promise((resolve) => { timer = setTimeout(resolve, waitMs); });
    await Promise.race([Promise.allSettled(closing), bound]);
    clearTimeout(timer);
  }

  /** closeAll(), then stop serving (a server inside a longer-lived process). */
  async shutdown(waitMs = 1000) {
    await this.closeAll(waitMs);
    if (this.server) this.server.forceShutdown();
  }
}

/** A line to stderr that can fail without raising anything (a broken pipe). */
function logToStderr(text) {
  try {
    fs.writeSync(2, `${text}\n`);
  } catch {
    // nobody is reading
  }
}

/** The socket's folder: private (0700), and short enough for a socket path. */
function makeSocketDir() {
  let base = os.tmpdir();
  if (base.length > 60) base = '/tmp'; // sun_path holds 108 bytes
  const dir = fs.mkdtempSync(path.join(base, 'sb-plugin-'));
  fs.chmodSync(dir, 0o700);
  return dir;
}

/**
 * Serve the declared nodes as the package `name`: print the handshake line,
 * then answer the host until stdin closes or SIGTERM. Nothing else is ever
 * written to stdout: once serve() is called, console.log and stdout writes
 * go to stderr (print nothing while the module loads).
 */
async function serve({ name, version = '0.0.0' } = {}) {
  let server;
  try {
    server = new PluginServer({ name, version });
  } catch (err) {
    // The usual cause: a package copied without its node_modules.
    const hint = err.code === 'MODULE_NOT_FOUND' ? `; run "npm ci" in ${process.cwd()}` : '';
    logToStderr(`switchboard plugin ${name}: ${String(err.message).split('\n')[0]}${hint}`);
    process.exit(1);
  }
  // stdout is the handshake channel: from here on anything a node prints
  // (console.log included) goes to stderr.
  const stdoutWrite = process.stdout.write.bind(process.stdout);
  process.stdout.write = process.stderr.write.bind(process.stderr);
  let stopping = false;
  const stop = (code) => {
    if (stopping) return;
    stopping = true;
    // Exiting closes the socket; a forced gRPC shutdown first would only
    // send a GOAWAY that the host's gRPC logs as a warning.
    server.closeAll().finally(() => process.exit(code));
  };
  // Every handler is in place before the handshake: the host may stop us
  // the moment it has read it. The host holds our stdin: when that closes,
  // the host is gone, and so are we.
  process.stdin.on('end', () => stop(0));
  process.stdin.on('close', () => stop(0));
  process.stdin.on('error', () => stop(0));
  process.stdin.resume();
  process.on('SIGTERM', () => stop(143));
  process.on('SIGINT', () => stop(130));
  // With the host gone, stdout and stderr are broken pipes: their errors are
  // ignored (stdin's end stops us), or each EPIPE reported to stderr would
  // raise the next one, for ever.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  // One node's stray error must not take the package's other nodes down.
  process.on('uncaughtException', (err) => logToStderr(`uncaught: ${err?.stack ?? err}`));
  process.on('unhandledRejection', (err) => logToStderr(`unhandled rejection: ${err?.stack ?? err}`));

  const dir = makeSocketDir();
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  let address;
  try {
    address = await server.start(`unix:${path.join(dir, 'plugin.sock')}`);
  } catch (err) {
    logToStderr(`switchboard plugin ${name}: cannot start: ${err.message}`);
    process.exit(1);
  }
  if (stopping) return server;
  const line = JSON.stringify({ switchboard_plugin: PROTOCOL, address, token: server.token, pid: process.pid });
  stdoutWrite(`${line}\n`);
  return server;
}

module.exports = {
  node, param, output, tool, serve, specs, callNode, labelFor, getPath, setPath, parsePath,
  NodeConfigError, PathError, PluginServer, DROP, AI, CUSTOM, MESSAGE, LIMITS, PROTOCOL, registry,
};
