'use strict';
// node --test: the text functions, the SDK's rules, a plugin server in this
// process (cancel, ordering, batching), and the real `node index.js` process.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { once } = require('node:events');

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const sb = require('../switchboard');
const text = require('../text');
const { regexRunner } = require('../index');

const ROOT = path.resolve(__dirname, '..');
const PROTO = path.resolve(ROOT, '..', '..', 'runtime', 'plugin', 'protos', 'switchboard', 'plugin', 'v1', 'plugin.proto');

test.after(() => regexRunner.stop());

// -- the text functions ------------------------------------------------------

test('slugify drops accents and joins words with the separator', () => {
  assert.equal(text.slugify('Crème Brûlée, 2nd edition!'), 'creme-brulee-2nd-edition');
  assert.equal(text.slugify("  Don't Panic  "), 'dont-panic');
  assert.equal(text.slugify('Straße über Ærø'), 'strasse-uber-aero');
  assert.equal(text.slugify('Hello World', { separator: '_', lowercase: false }), 'Hello_World');
  assert.equal(text.slugify('東京 タワー', { ascii: false }), '東京-タワー');
  assert.equal(text.slugify('東京'), '');
  assert.equal(text.slugify('alpha beta gamma', { maxLength: 11 }), 'alpha-beta');
  assert.equal(text.slugify('ab cd', { separator: '--', maxLength: 3 }), 'ab');
  assert.throws(() => text.slugify('x', { separator: '-'.repeat(9) }), { name: 'NodeConfigError' });
});

test('countWords counts Unicode words, code points and lines', () => {
  assert.deepEqual(text.countWords(''), { words: 0, characters: 0, lines: 0 });
  assert.deepEqual(text.countWords('Hello, world!\nSecond line\n'), { words: 4, characters: 26, lines: 2 });
  assert.deepEqual(text.countWords('a\r\nb\rc'), { words: 3, characters: 6, lines: 3 });
  // An emoji outside the BMP is one character, not two.
  assert.equal(text.countWords('😀 ok').characters, 4);
  assert.ok(text.countWords('東京タワーに行きました').words > 1);
});

test('changeCase: upper, lower, title; another mode is refused', () => {
  assert.equal(text.changeCase('hello WORLD', 'upper'), 'HELLO WORLD');
  assert.equal(text.changeCase('hello WORLD', 'lower'), 'hello world');
  assert.equal(text.changeCase("o'neil meets the BBC", 'title'), "O'neil Meets The Bbc");
  assert.throws(() => text.changeCase('x', 'snake'), { name: 'NodeConfigError', message: /mode/ });
});

test('extractMatches returns matches, groups and null for a group that took no part', () => {
  assert.deepEqual(text.extractMatches('a1 b22 c333', '[a-z]\\d+'),
    { matches: ['a1', 'b22', 'c333'], truncated: false });
  assert.deepEqual(text.extractMatches('a1 b22', '([a-z])(\\d+)', '', 2).matches, ['1', '22']);
  assert.deepEqual(text.extractMatches('ab a', 'a(b)?', '', 1).matches, ['b', null]);
  assert.deepEqual(text.extractMatches('ABC', 'b', 'i').matches, ['B']);
  // Empty matches advance instead of looping for ever, by code point with u.
  assert.equal(text.extractMatches('abc', 'x*').matches.length, 4);
  assert.equal(text.extractMatches('😀😀', 'x*', 'u').matches.length, 3);
  assert.throws(() => text.extractMatches('abc', ''), { name: 'NodeConfigError', message: /no pattern/ });
});

test('extractMatches is bounded: matches, pattern size, flags, groups', () => {
  const many = text.extractMatches('x'.repeat(5000), 'x', '', 0, text.MAX_MATCHES);
  assert.equal(many.matches.length, 1000);
  assert.equal(many.truncated, true);
  assert.throws(() => text.extractMatches('x', 'x'.repeat(1001)),
    { name: 'NodeConfigError', message: /pattern: 1001 characters/ });
  assert.throws(() => text.extractMatches('x', 'x', 'g'), { name: 'NodeConfigError', message: /flags/ });
  assert.throws(() => text.extractMatches('x', 'x', 'ii'), { name: 'NodeConfigError', message: /flags/ });
  assert.throws(() => text.extractMatches('x', '(x)', '', 2), { name: 'NodeConfigError', message: /group: 2.*1 group\b/ });
  assert.throws(() => text.extractMatches('x', '(x'), { name: 'NodeConfigError', message: /pattern:/ });
});

test('asText and asInt name the param they refuse', () => {
  assert.equal(text.asText(12, 'text'), '12');
  assert.throws(() => text.asText(null, 'text'), { message: 'text: no text given' });
  assert.throws(() => text.asText({}, 'text'), { message: /text: expected text/ });
  assert.throws(() => text.asText('x'.repeat(text.MAX_TEXT_CHARS + 1), 'text'), { message: /more than the limit/ });
  assert.equal(text.asInt('7', 'n', 0, 10), 7);
  assert.throws(() => text.asInt(11, 'n', 0, 10), { message: /n: expected a whole number from 0 to 10/ });
});

// -- the SDK -----------------------------------------------------------------

test('labelFor reads like runtime.node.label_for', () => {
  assert.equal(sb.labelFor('smtp_host'), 'SMTP host');
  assert.equal(sb.labelFor('api_key_env'), 'API key env');
  assert.equal(sb.labelFor('base_url'), 'Base URL');
  assert.equal(sb.labelFor('max_length'), 'Max length');
  assert.equal(sb.labelFor('dir'), 'Folder');
  assert.equal(sb.labelFor('_'), '_');
});

test('param defaults follow runtime.node.Param', () => {
  const plain = sb.param('str');
  assert.equal(plain.allow, sb.CUSTOM | sb.MESSAGE);
  assert.equal(plain.scope, 'custom');
  const ai = sb.param('str', '', { scope: 'ai' });
  assert.equal(ai.allow, sb.AI | sb.CUSTOM | sb.MESSAGE);
  assert.equal(ai.scope, 'ai');
  assert.equal(sb.param('str', '', { allow: sb.AI | sb.MESSAGE }).scope, 'ai');
  assert.equal(sb.param('str', '', { scope: sb.MESSAGE | sb.AI }).scope, 'ai');
  assert.equal(sb.param('str', '', { choices: ['a', 'b'] }).type, 'enum');
  assert.equal(sb.param('secret').allow, sb.CUSTOM);
  assert.throws(() => sb.param('secret', '', { allow: sb.CUSTOM | sb.AI }), /only CUSTOM/);
  assert.throws(() => sb.param('str', '', { allow: sb.CUSTOM, scope: 'ai' }), /not in allow/);
  assert.throws(() => sb.param('text'), /unsupported param type/);
  assert.throws(() => sb.param('str', '', { deafult: 1 }), /unknown param option 'deafult'/);
});

test('a param or output may not take a reserved name', () => {
  for (const name of ['send', 'id', 'onMessage', '_x', 'status']) {
    assert.throws(() => sb.node(`test.reserved_${name.replace(/\W/g, '')}`, {
      name: 'R', category: 'Test', params: { [name]: sb.param('str') },
    }), /reserved/);
  }
});

test('a param and an output may not share a name', () => {
  assert.throws(() => sb.node('test.shared_name', {
    name: 'S', category: 'Test', params: { text: sb.param('str') }, outputs: { text: sb.output('str') },
  }), /'text' is reserved/);
});

test('parsePath keeps what it parsed (the same frozen parts for the same path), bad paths still throw', () => {
  const first = sb.parsePath('payload.items[0].name');
  assert.deepEqual(first, ['payload', 'items', 0, 'name']);
  assert.equal(sb.parsePath('payload.items[0].name'), first); // before: parsed again each call
  assert.ok(Object.isFrozen(first));
  for (let i = 0; i < 3; i++) assert.throws(() => sb.parsePath('a..b'), { name: 'PathError', message: /empty segment/ });
  assert.throws(() => sb.parsePath(7), { name: 'PathError', message: /must be text/ });
  for (let i = 0; i < 1500; i++) assert.deepEqual(sb.parsePath(`many.${i}`), ['many', i]); // bounded
});

test('setPath writes dotted paths and [n] indices like runtime.message.set_path', () => {
  const msg = { payload: 1 };
  sb.setPath(msg, 'a.b.c', 1);
  sb.setPath(msg, 'list[0].name', 'x');
  sb.setPath(msg, 'list.1', 'y');
  sb.setPath(msg, 'made.0', 'first'); // a number part after a missing one makes a list
  msg.obj = {};
  sb.setPath(msg, 'obj.0', 'key'); // and names the key "0" in an object
  assert.deepEqual(msg, { payload: 1, a: { b: { c: 1 } }, list: [{ name: 'x' }, 'y'], made: ['first'], obj: { 0: 'key' } });
  sb.setPath(msg, 'payload.x', 2); // a scalar on the way is replaced by an object
  assert.deepEqual(msg.payload, { x: 2 });
  assert.throws(() => sb.setPath(msg, 'list.5', 1), { name: 'PathError', message: /past the end/ });
  assert.throws(() => sb.setPath(msg, 'a..b', 1), { name: 'PathError', message: /empty segment/ });
  assert.equal(sb.getPath(msg, 'list[1]'), 'y');
  assert.equal(sb.getPath(msg, 'a.x.y', 'none'), 'none');
});

test('a path through __proto__ is a key, never the prototype', () => {
  const msg = {};
  sb.setPath(msg, '__proto__.polluted', true);
  assert.equal({}.polluted, undefined);
  assert.equal(Object.getPrototypeOf(msg), Object.prototype);
  assert.deepEqual(Object.keys(msg), ['__proto__']);
  assert.equal(sb.getPath({}, 'constructor', 'none'), 'none');
});

function slugifyInstance(params = {}, outputs = {}) {
  return sb.registry.get('text.slugify').instantiate({ id: 'n1', params, outputs });
}

test('param.get: host-resolved value, then custom setting, then the caller default, then the default', async () => {
  const type = sb.node('test.get_order', {
    name: 'Get order', category: 'Test',
    params: { p: sb.param('str', '', { default: 'spec' }), q: sb.param('str', '', { scope: 'message' }) },
    onMessage(msg) { msg.seen = [this.p.get(msg), this.p.get(msg, 'caller'), this.q.get(msg), this.q.get(msg, 'caller')]; },
  });
  const custom = type.instantiate({ id: 'a', params: { p: { scope: 'custom', value: 'flow' } } });
  let out = await sb.callNode(custom, {}, {});
  assert.deepEqual(out.msg.seen, ['flow', 'flow', null, 'caller']);
  out = await sb.callNode(custom, {}, { p: 'host', q: 'resolved' });
  assert.deepEqual(out.msg.seen, ['host', 'host', 'resolved', 'resolved']);
  const unset = type.instantiate({ id: 'b', params: { p: { scope: 'custom', value: null } } });
  out = await sb.callNode(unset, {}, {});
  assert.deepEqual(out.msg.seen, ['spec', 'caller', null, 'caller']);
});

test('slugify node: RPA mode writes the output path, tool mode __tool_data__', async () => {
  let out = await sb.callNode(slugifyInstance(), { _msgid: 'm', payload: 'Hello, World!' }, { text: 'Hello, World!' });
  assert.deepEqual(out, { msg: { _msgid: 'm', payload: 'hello-world' }, ports: null });

  const moved = slugifyInstance({ separator: { scope: 'custom', value: '_' } }, { slug: 'meta.slug' });
  out = await sb.callNode(moved, { payload: 'A B' }, { text: 'A B' });
  assert.deepEqual(out.msg, { payload: 'A B', meta: { slug: 'a_b' } });

  const request = { __message_type__: 'tool_request', __parameters__: { text: 'Tool Call' }, payload: 'kept' };
  out = await sb.callNode(slugifyInstance(), request, { text: 'Tool Call' });
  assert.deepEqual(out.msg.__tool_data__, { slug: 'tool-call' });
  assert.equal(out.msg.payload, 'kept');
});

test('a node error: NodeConfigError is for the user, others are not', async () => {
  await assert.rejects(sb.callNode(slugifyInstance(), {}, {}), { name: 'NodeConfigError', message: 'text: no text given' });
  const type = sb.node('test.bug', { name: 'Bug', category: 'Test', onMessage() { return null.x; } });
  await assert.rejects(sb.callNode(type.instantiate({ id: 'b' }), {}), { name: 'TypeError' });
});

test('onMessage returns ports: nothing, DROP, a name, a list; anything else is an error', async () => {
  const type = sb.node('test.ports', {
    name: 'Ports', category: 'Test', outputPorts: ['out', 'other'],
    onMessage(msg) { return msg.ret === 'DROP' ? sb.DROP : msg.ret; },
  });
  const inst = type.instantiate({ id: 'p' });
  assert.equal((await sb.callNode(inst, {})).ports, null);
  assert.deepEqual((await sb.callNode(inst, { ret: 'DROP' })).ports, []);
  assert.deepEqual((await sb.callNode(inst, { ret: 'other' })).ports, ['other']);
  assert.deepEqual((await sb.callNode(inst, { ret: ['out', 'other'] })).ports, ['out', 'other']);
  await assert.rejects(sb.callNode(inst, { ret: 5 }), { name: 'TypeError' });
  assert.deepEqual(type.spec('pkg').outputs.map((p) => p.name), ['out', 'other']);
});

test('send, debug, status and log become frames; send in tool mode is ignored', async () => {
  const frames = [];
  const type = sb.node('test.services', {
    name: 'Services', category: 'Test',
    onMessage(msg) {
      this.send({ payload: 'extra' }, 'out');
      this.debug({ v: 1 }, msg);
      this.status('busy', 'blue', 'running');
      this.log('hello', 'warning');
      return sb.DROP;
    },
  });
  const inst = type.instantiate({ id: 'svc', sink: (frame) => frames.push(frame) });
  await sb.callNode(inst, { _msgid: 'm7' }, {}, { id: 42 });
  assert.deepEqual(frames.map((f) => [f.kind, f.id ?? null, f.instance]),
    [['SEND', 42, 'svc'], ['DEBUG', null, 'svc'], ['STATUS', null, 'svc'], ['LOG', null, 'svc']]);
  assert.deepEqual(frames[1].data, { value: { v: 1 }, msgid: 'm7' });
  assert.deepEqual(frames[2].data, { text: 'busy', color: 'blue', state: 'running' });
  frames.length = 0;
  await sb.callNode(inst, { __message_type__: 'tool_request', __parameters__: {} });
  assert.deepEqual(frames.map((f) => f.kind), ['DEBUG', 'STATUS', 'LOG']);
});

test('regex_extract node: matches, count, truncated; a bad pattern is a config error', async () => {
  const type = sb.registry.get('text.regex_extract');
  const inst = type.instantiate({ id: 'r', params: { pattern: { scope: 'custom', value: '(\\w+)@(\\w+)\\.com' }, group: { scope: 'custom', value: 2 } } });
  const out = await sb.callNode(inst, { payload: 'ann@example.com, bob@test.com' }, { text: 'ann@example.com, bob@test.com' });
  assert.deepEqual(out.msg, { payload: ['example', 'test'], count: 2, truncated: false });
  const long = type.instantiate({ id: 'r2', params: { pattern: { scope: 'custom', value: 'a'.repeat(1001) } } });
  await assert.rejects(sb.callNode(long, {}, { text: 'a' }), { name: 'NodeConfigError', message: /pattern: 1001 characters/ });
  const tooMany = type.instantiate({ id: 'r3', params: { pattern: { scope: 'custom', value: 'a' }, max_matches: { scope: 'custom', value: 1001 } } });
  await assert.rejects(sb.callNode(tooMany, {}, { text: 'a' }), { name: 'NodeConfigError', message: /max_matches/ });
});

// (a+)+$ on "aaa…ab" backtracks through 2^64 paths: no machine finishes it,
// so these outcomes do not depend on how fast this one is.
const RUNAWAY = { pattern: '(a+)+$', text: `${'a'.repeat(64)}b` };

test('regex_extract: a runaway pattern hits the time limit, and the next call still works', async () => {
  const type = sb.registry.get('text.regex_extract');
  const inst = type.instantiate({ id: 'slow', params: {
    pattern: { scope: 'custom', value: RUNAWAY.pattern }, timeout_seconds: { scope: 'custom', value: 0.05 } } });
  await assert.rejects(sb.callNode(inst, {}, { text: RUNAWAY.text }), { name: 'NodeConfigError', message: /no result within 0.05 s/ });
  const ok = type.instantiate({ id: 'ok', params: { pattern: { scope: 'custom', value: 'b' } } });
  assert.deepEqual((await sb.callNode(ok, {}, { text: 'abc' })).msg.payload, ['b']);
});

test('regex_extract: cancelling the call stops the runaway search', async () => {
  const type = sb.registry.get('text.regex_extract');
  const inst = type.instantiate({ id: 'cancel', params: {
    pattern: { scope: 'custom', value: RUNAWAY.pattern }, timeout_seconds: { scope: 'custom', value: 60 } } });
  const abort = new AbortController();
  const call = sb.callNode(inst, {}, { text: RUNAWAY.text }, { signal: abort.signal });
  abort.abort();
  await assert.rejects(call, /cancelled/);
  const ok = type.instantiate({ id: 'ok2', params: { pattern: { scope: 'custom', value: 'c' } } });
  assert.deepEqual((await sb.callNode(ok, {}, { text: 'abc' })).msg.payload, ['c']);
});

test('specs: every key of NodeSpec, labels, first output at payload, scopes in order', () => {
  const spec = sb.registry.get('text.slugify').spec('textkit');
  assert.deepEqual(Object.keys(spec), ['type', 'name', 'category', 'description', 'icon', 'color', 'inputs',
    'outputs', 'dynamic_outputs', 'params', 'results', 'tool', 'source', 'package', 'plugin']);
  assert.equal(spec.package, 'textkit');
  const textParam = spec.params[0];
  assert.deepEqual(textParam.allowed_scopes, ['ai', 'custom', 'message']);
  assert.equal(textParam.default_scope, 'message');
  assert.equal(textParam.default_path, 'payload');
  assert.equal(textParam.has_default, false);
  assert.equal(spec.params.find((p) => p.name === 'max_length').label, 'Max length');
  assert.deepEqual(sb.registry.get('text.word_count').spec('textkit').results.map((r) => [r.name, r.path]),
    [['words', 'payload'], ['characters', 'characters'], ['lines', 'lines']]);
  assert.deepEqual(spec.tool, { name: 'slugify', description: spec.tool.description });
});

// -- a plugin server in this process -----------------------------------------

/** Tests that run a server or a process end, pass or fail, within this bound. */
const BOUND = { timeout: 60_000 };

function loadClient() {
  const def = protoLoader.loadSync(PROTO, { keepCase: true, longs: Number, enums: String, defaults: true });
  return grpc.loadPackageDefinition(def).switchboard.plugin.v1.Plugin;
}

function metadata(token) {
  const md = new grpc.Metadata();
  md.set('x-switchboard-token', token);
  return md;
}

function unary(client, method, request, md) {
  return new Promise((resolve, reject) => {
    client[method](request, md, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

/** The frames of a Channel, one at a time, and the Batches they came in. */
function frameReader(stream) {
  const frames = [];
  const batches = [];
  let wake = null;
  // The status that ends the call: after stream.end(), the plugin ends its side.
  const status = new Promise((resolve) => {
    stream.on('status', resolve);
    stream.on('error', resolve);
  });
  stream.on('data', (batch) => {
    batches.push(batch.frames.length);
    for (const f of batch.frames) frames.push({ ...f, data: f.data.length ? JSON.parse(f.data.toString()) : null });
    if (wake) wake();
  });
  return {
    batches,
    async close() {
      stream.end();
      return status;
    },
    async next() {
      while (!frames.length) await new Promise((resolve) => { wake = resolve; });
      return frames.shift();
    },
  };
}

const json = (value) => Buffer.from(JSON.stringify(value));

// Each waiting call resolves when the test says so, to order completions by hand.
const gates = new Map();
sb.node('test.gated', {
  name: 'Gated', category: 'Test',
  params: { gate: sb.param('str', '', { scope: 'message' }) },
  async onMessage(msg) {
    const name = this.gate.get(msg);
    this.send({ payload: `from ${name}` });
    await new Promise((resolve) => gates.set(name, resolve));
    msg.done = name;
  },
});

async function withServer(fn) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-js-test-'));
  process.env.SWITCHBOARD_PLUGIN_PROTO = PROTO;
  const server = new sb.PluginServer({ name: 'textkit', version: '0.1.0' });
  const address = await server.start(`unix:${path.join(dir, 'plugin.sock')}`);
  const Client = loadClient();
  const client = new Client(address, grpc.credentials.createInsecure());
  try {
    await fn({ server, client, md: metadata(server.token) });
  } finally {
    grpc.Client.prototype.close.call(client); // client.close is the Close RPC
    await server.shutdown(0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function waitForGate(name) {
  while (!gates.has(name)) await new Promise((resolve) => setImmediate(resolve));
  return gates.get(name);
}

test('server: replies in order of completion, a cancelled call never answers, sends carry the call id', BOUND, async () => {
  await withServer(async ({ server, client, md }) => {
    const created = await unary(client, 'Create', { instance: 'g', type: 'test.gated', name: 'Gated', run: 'r',
      params_json: json({ gate: { scope: 'message', path: 'gate' } }), outputs_json: json({}) }, md);
    assert.equal(created.error, '');
    const stream = client.Channel(md);
    const reader = frameReader(stream);
    const call = (id, gate) => ({ kind: 'CALL', id, instance: 'g', data: json({ msg: { n: id }, params: { gate } }) });
    stream.write({ frames: [call(1, 'one'), call(2, 'two'), call(3, 'three')] });
    // The sends of all three, written as they happened, in one Batch.
    const sends = [await reader.next(), await reader.next(), await reader.next()];
    assert.deepEqual(sends.map((f) => [f.kind, f.id, f.data.payload]),
      [['SEND', 1, 'from one'], ['SEND', 2, 'from two'], ['SEND', 3, 'from three']]);
    assert.deepEqual(reader.batches, [3]);
    assert.equal((await unary(client, 'Health', {}, md)).in_flight, 3);

    stream.write({ frames: [{ kind: 'CANCEL', id: 1 }] });
    await waitForGate('one');
    while (server.inFlight !== 2) await new Promise((resolve) => setImmediate(resolve));
    gates.get('one')(); // finishes after its cancel: dropped
    gates.get('three')();
    let f = await reader.next();
    assert.deepEqual([f.kind, f.id, f.data.msg.done, f.data.ports], ['RESULT', 3, 'three', null]);
    gates.get('two')();
    f = await reader.next();
    assert.deepEqual([f.kind, f.id, f.data.msg], ['RESULT', 2, { n: 2, done: 'two' }]);
    const health = await unary(client, 'Health', {}, md);
    assert.deepEqual([health.status, health.instances, health.in_flight, health.pid], ['serving', 1, 0, process.pid]);
    assert.equal((await reader.close()).code, grpc.status.OK);
  });
});

// What test.signal's calls saw of their signal, by gate name.
const seenAborted = new Map();
sb.node('test.signal', {
  name: 'Signal', category: 'Test',
  params: { gate: sb.param('str', '', { scope: 'message' }) },
  async onMessage(msg, info) {
    const name = this.gate.get(msg);
    if (name === 'plain') return; // never looks at its signal
    await new Promise((resolve) => gates.set(name, resolve));
    seenAborted.set(name, info.signal.aborted); // asked for after the wait (and a CANCEL)
  },
});

test('server: a call\'s AbortSignal is made only if its node asks, aborted if asked after a CANCEL', BOUND, async () => {
  const Real = globalThis.AbortController;
  let made = 0;
  globalThis.AbortController = class extends Real {
    constructor() {
      super();
      made += 1;
    }
  };
  try {
    await withServer(async ({ server, client, md }) => {
      await unary(client, 'Create', { instance: 's', type: 'test.signal', name: '', run: 'r',
        params_json: json({ gate: { scope: 'message', path: 'gate' } }), outputs_json: json({}) }, md);
      const stream = client.Channel(md);
      const reader = frameReader(stream);
      const call = (id, gate) => ({ kind: 'CALL', id, instance: 's', data: json({ msg: { n: id }, params: { gate } }) });
      stream.write({ frames: [call(1, 'plain'), call(2, 'late'), call(3, 'kept')] });
      let f = await reader.next();
      assert.deepEqual([f.kind, f.id], ['RESULT', 1]);
      assert.equal(made, 0); // before: one AbortController a call
      await waitForGate('late');
      await waitForGate('kept');
      stream.write({ frames: [{ kind: 'CANCEL', id: 2 }] });
      while (server.inFlight !== 1) await new Promise((resolve) => setImmediate(resolve));
      gates.get('late')();
      gates.get('kept')();
      f = await reader.next();
      assert.deepEqual([f.kind, f.id], ['RESULT', 3]);
      assert.equal(seenAborted.get('late'), true);
      assert.equal(seenAborted.get('kept'), false);
      assert.equal(made, 2);
      assert.equal((await reader.close()).code, grpc.status.OK);
    });
  } finally {
    globalThis.AbortController = Real;
  }
});

test('server: a bad frame costs that frame only', BOUND, async () => {
  await withServer(async ({ client, md }) => {
    await unary(client, 'Create', { instance: 's', type: 'text.slugify', name: '', run: 'r',
      params_json: Buffer.alloc(0), outputs_json: Buffer.alloc(0) }, md);
    const stream = client.Channel(md);
    const reader = frameReader(stream);
    stream.write({ frames: [
      { kind: 'CALL', id: 1, instance: 's', data: Buffer.from('{not json') },
      { kind: 'CALL', id: 2, instance: 'nobody', data: json({ msg: {} }) },
      { kind: 'CALL', id: 3, instance: 's', data: json({ msg: [] }) },
      { kind: 'RESULT', id: 4 },
      { kind: 'GENERATE', id: 5, instance: 's' },
      { kind: 'CALL', id: 6, instance: 's', data: json({ msg: { payload: 'OK then' }, params: { text: 'OK then' } }) },
    ] });
    const got = [];
    for (let i = 0; i < 6; i++) got.push(await reader.next());
    assert.deepEqual(got.map((f) => [f.kind, f.id]),
      [['ERROR', 1], ['ERROR', 2], ['ERROR', 3], ['ERROR', 4], ['ERROR', 5], ['RESULT', 6]]);
    assert.match(got[1].data.message, /no instance 'nobody'/);
    assert.match(got[4].data.message, /not a source/);
    assert.equal(got[5].data.msg.payload, 'ok-then');
    assert.equal((await reader.close()).code, grpc.status.OK);
  });
});

test('server: Create refuses an unknown type and a duplicate id; Close is idempotent', BOUND, async () => {
  await withServer(async ({ client, md }) => {
    const req = { instance: 'x', type: 'text.nope', name: '', run: '', params_json: Buffer.alloc(0), outputs_json: Buffer.alloc(0) };
    assert.match((await unary(client, 'Create', req, md)).error, /no node type 'text.nope'/);
    assert.equal((await unary(client, 'Create', { ...req, type: 'text.case' }, md)).error, '');
    assert.match((await unary(client, 'Create', { ...req, type: 'text.case' }, md)).error, /exists already/);
    assert.match((await unary(client, 'Create', { ...req, instance: 'y', type: 'text.case', params_json: Buffer.from('[1]') }, md)).error, /JSON object/);
    assert.equal((await unary(client, 'Close', { instance: 'x' }, md)).error, '');
    assert.equal((await unary(client, 'Close', { instance: 'x' }, md)).error, '');
    assert.equal((await unary(client, 'Health', {}, md)).instances, 0);
  });
});

// -- the real process --------------------------------------------------------

const children = new Set();
test.after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

function spawnPlugin(args) {
  const child = spawn(process.execPath, args, {
    cwd: ROOT, env: { ...process.env, SWITCHBOARD_PLUGIN_PROTO: PROTO }, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  const exit = once(child, 'exit');
  /** The exit code; a failure (the child killed) past a generous bound, so
   * that a plugin that never exits fails its test instead of hanging the run. */
  child.exited = async (boundMs = 30000) => {
    let timer;
    const bound = new Promise((resolve, reject) => {
      timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`the plugin did not exit within ${boundMs / 1000} s`));
      }, boundMs);
    });
    try {
      const [code] = await Promise.race([exit, bound]);
      return code;
    } finally {
      clearTimeout(timer);
    }
  };
  return child;
}

function startPlugin() {
  const child = spawnPlugin(['index.js']);
  child.stderr.pipe(process.stderr);
  const lines = [];
  const reader = readline.createInterface({ input: child.stdout });
  reader.on('line', (line) => lines.push(line));
  const handshake = once(reader, 'line').then(([line]) => JSON.parse(line));
  return { child, handshake, lines };
}

test('node index.js: handshake, Describe, Create, a slugify call, wrong token refused, exits when stdin closes', BOUND, async () => {
  const { child, handshake, lines } = startPlugin();
  const hs = await handshake;
  assert.deepEqual(Object.keys(hs), ['switchboard_plugin', 'address', 'token', 'pid']);
  assert.equal(hs.switchboard_plugin, 1);
  assert.equal(hs.pid, child.pid);
  assert.match(hs.token, /^[0-9a-f]{32}$/);
  assert.match(hs.address, /^unix:\/.*\/plugin\.sock$/);
  const dir = path.dirname(hs.address.slice('unix:'.length));
  assert.equal(fs.statSync(dir).mode & 0o777, 0o700);

  const Client = loadClient();
  const client = new Client(hs.address, grpc.credentials.createInsecure());
  const md = metadata(hs.token);
  try {
    const described = await unary(client, 'Describe', { protocol: 1 }, md);
    assert.deepEqual([described.protocol, described.name, described.version, described.language], [1, 'textkit', '0.1.0', 'node']);
    const types = JSON.parse(described.specs_json.toString()).map((s) => s.type);
    assert.deepEqual(types, ['text.slugify', 'text.word_count', 'text.regex_extract', 'text.case']);

    await assert.rejects(unary(client, 'Describe', { protocol: 1 }, metadata('0'.repeat(32))),
      { code: grpc.status.UNAUTHENTICATED });
    await assert.rejects(unary(client, 'Health', {}, new grpc.Metadata()), { code: grpc.status.UNAUTHENTICATED });
    const refused = client.Channel(metadata('wrong'));
    refused.on('data', () => assert.fail('a refused Channel sent data'));
    const [err] = await once(refused, 'error');
    assert.equal(err.code, grpc.status.UNAUTHENTICATED);

    const created = await unary(client, 'Create', { instance: 'run1/slug/1', type: 'text.slugify', name: 'Slug', run: 'run1',
      params_json: json({ text: { scope: 'message', path: 'payload' } }), outputs_json: json({ slug: 'payload' }) }, md);
    assert.equal(created.error, '');
    const stream = client.Channel(md);
    const reader = frameReader(stream);
    stream.write({ frames: [{ kind: 'CALL', id: 7, instance: 'run1/slug/1',
      data: json({ msg: { _msgid: 'a', payload: 'Crème Brûlée!' }, params: { text: 'Crème Brûlée!' } }) }] });
    const result = await reader.next();
    assert.deepEqual([result.kind, result.id, result.data], ['RESULT', 7, { msg: { _msgid: 'a', payload: 'creme-brulee' }, ports: null }]);
    assert.equal((await reader.close()).code, grpc.status.OK);
  } finally {
    grpc.Client.prototype.close.call(client); // client.close is the Close RPC
  }
  child.stdin.end();
  const code = await child.exited();
  assert.equal(code, 0);
  assert.equal(fs.existsSync(dir), false, 'the socket folder is removed');
  assert.equal(lines.length, 1, 'nothing but the handshake on stdout');
});

test('a node that prints: its output goes to stderr, never into the handshake channel', BOUND, async () => {
  const script = `
    const sb = require('./switchboard');
    sb.node('test.noisy', { name: 'Noisy', category: 'Test', onMessage() { console.log('printed'); } });
    sb.serve({ name: 'noisy' }).then(() => { console.log('after the handshake'); process.stdout.write('written\\n'); });`;
  const child = spawnPlugin(['-e', script]);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  while (!stderr.includes('written')) await once(child.stderr, 'data');
  child.stdin.end();
  assert.equal(await child.exited(), 0);
  const lines = stdout.trim().split('\n');
  assert.equal(lines.length, 1);
  assert.equal(JSON.parse(lines[0]).switchboard_plugin, 1);
  assert.match(stderr, /after the handshake\nwritten/);
});

test('a host gone without a word: a stray error with stderr closed does not stop the exit on stdin EOF', BOUND, async () => {
  const script = `
    const sb = require('./switchboard');
    sb.node('test.chatty', { name: 'Chatty', category: 'Test',
      onMessage() { setImmediate(() => { throw new Error('a stray error'); }); } });
    sb.serve({ name: 'chatty' });`;
  const child = spawnPlugin(['-e', script]);
  const [line] = await once(readline.createInterface({ input: child.stdout }), 'line');
  const hs = JSON.parse(line);
  child.stderr.destroy(); // the reading end is gone, as when the host was killed
  const Client = loadClient();
  const client = new Client(hs.address, grpc.credentials.createInsecure());
  const md = metadata(hs.token);
  try {
    assert.equal((await unary(client, 'Create', { instance: 'c', type: 'test.chatty', name: '', run: '',
      params_json: Buffer.alloc(0), outputs_json: Buffer.alloc(0) }, md)).error, '');
    const stream = client.Channel(md);
    const reader = frameReader(stream);
    stream.write({ frames: [{ kind: 'CALL', id: 1, instance: 'c', data: json({ msg: {} }) }] });
    assert.equal((await reader.next()).kind, 'RESULT');
    assert.equal((await unary(client, 'Health', {}, md)).status, 'serving');
    await reader.close();
  } finally {
    grpc.Client.prototype.close.call(client);
  }
  child.stdin.end();
  const code = await child.exited();
  assert.equal(code, 0);
});

test('node index.js: SIGTERM stops it and removes its socket folder', BOUND, async () => {
  const { child, handshake } = startPlugin();
  const hs = await handshake;
  const dir = path.dirname(hs.address.slice('unix:'.length));
  child.kill('SIGTERM');
  const code = await child.exited();
  assert.equal(code, 143);
  assert.equal(fs.existsSync(dir), false);
});
