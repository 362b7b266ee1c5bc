'use strict';
/**
 * Runs regular expressions off the main thread. JavaScript regexes
 * backtrack, so a pattern such as (a+)+$ can spin for years on a short text;
 * here it can only block this worker, which the main thread terminates when
 * the time limit passes or the call is cancelled, and every other node of
 * the package goes on meanwhile.
 */

const { parentPort, isMainThread } = require('node:worker_threads');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { extractMatches } = require('./text');
const { NodeConfigError } = require('./switchboard');

if (!isMainThread && parentPort) {
  parentPort.on('message', ({ id, args }) => {
    try {
      parentPort.postMessage({ id, result: extractMatches(...args) });
    } catch (err) {
      parentPort.postMessage({ id, error: { name: err.name, message: err.message } });
    }
  });
}

const MAX_WAITING = 1000;

/** One worker, one job at a time; a job that overstays kills the worker and
 * the next job gets a new one. */
class RegexRunner {
  constructor() {
    this.worker = null;
    this.queue = [];
    this.current = null;
    this.nextId = 1;
  }

  /** extractMatches(...args) in the worker; rejects with an Error named
   * NodeConfigError for a bad pattern or one over `timeoutMs`. */
  run(args, { timeoutMs = 5000, signal } = {}) {
    if (signal?.aborted) return Promise.reject(new Error('cancelled'));
    if (this.queue.length >= MAX_WAITING) {
      return Promise.reject(configError(`too many regex jobs waiting (limit ${MAX_WAITING})`));
    }
    return new Promise((resolve, reject) => {
      const job = { id: this.nextId++, args, timeoutMs, signal, resolve, reject, timer: null };
      job.onAbort = () => this.abandon(job, new Error('cancelled'));
      signal?.addEventListener('abort', job.onAbort, { once: true });
      this.queue.push(job);
      this.pump();
    });
  }

  pump() {
    if (this.current || !this.queue.length) return;
    const job = this.queue.shift();
    this.current = job;
    const worker = this.ensureWorker();
    worker.ref(); // a job under way keeps the process alive
    job.timer = setTimeout(() => this.abandon(job, configError(
      `pattern: no result within ${job.timeoutMs / 1000} s; the pattern may backtrack without end on this text`)),
    job.timeoutMs);
    worker.postMessage({ id: job.id, args: job.args });
  }

  ensureWorker() {
    if (this.worker) return this.worker;
    // Bounded memory: a runaway job ends this worker, not the process.
    const worker = new Worker(path.join(__dirname, 'regex_worker.js'),
      { resourceLimits: { maxOldGenerationSizeMb: 256 } });
    worker.on('message', ({ id, result, error }) => {
      const job = this.current;
      if (!job || job.id !== id) return;
      if (error) {
        const err = error.name === 'NodeConfigError' ? configError(error.message) : new Error(error.message);
        this.settle(job, () => job.reject(err));
      } else {
        this.settle(job, () => job.resolve(result));
      }
    });
    worker.on('error', (err) => {
      if (this.worker === worker) this.worker = null;
      const job = this.current;
      if (job) this.settle(job, () => job.reject(err));
    });
    worker.on('exit', () => {
      if (this.worker === worker) this.worker = null;
    });
    worker.unref();
    this.worker = worker;
    return worker;
  }

  settle(job, finish) {
    clearTimeout(job.timer);
    job.signal?.removeEventListener('abort', job.onAbort);
    if (this.current === job) {
      this.current = null;
      this.worker?.unref();
    }
    finish();
    this.pump();
  }

  /** Give up on a job: unqueue it, or kill the worker that runs it. */
  abandon(job, err) {
    const waiting = this.queue.indexOf(job);
    if (waiting >= 0) {
      this.queue.splice(waiting, 1);
      job.signal?.removeEventListener('abort', job.onAbort);
      job.reject(err);
      return;
    }
    if (this.current !== job) return;
    const worker = this.worker;
    this.worker = null;
    if (worker) worker.terminate();
    this.settle(job, () => job.reject(err));
  }

  /** Stop the worker (tests, shutdown). */
  async stop() {
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
  }
}

function configError(message) {
  return new NodeConfigError(message);
}

module.exports = { RegexRunner };
