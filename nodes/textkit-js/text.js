'use strict';
/**
 * The text functions behind the textkit nodes: pure, synchronous, and
 * bounded, so that tests call them directly and the regex worker can run
 * extractMatches without the SDK.
 */

/** Longest text any node takes, in UTF-16 code units. */
const MAX_TEXT_CHARS = 5_000_000;
const MAX_PATTERN_CHARS = 1000;
const MAX_MATCHES = 1000;
const MAX_SEPARATOR_CHARS = 8;
const REGEX_FLAGS = new Set(['i', 'm', 's', 'u']);

// The SDK loads no gRPC until it serves, so the regex worker can use it too.
const { NodeConfigError } = require('./switchboard');

/** A text param's value as a string: numbers and booleans are written out,
 * anything else is refused with a message naming the param. */
function asText(value, param) {
  if (typeof value === 'string') {
    if (value.length > MAX_TEXT_CHARS) {
      throw new NodeConfigError(`${param}: ${value.length} characters, more than the limit of ${MAX_TEXT_CHARS}`);
    }
    return value;
  }
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === null || value === undefined) throw new NodeConfigError(`${param}: no text given`);
  throw new NodeConfigError(`${param}: expected text, got ${Array.isArray(value) ? 'a list' : typeof value}`);
}

function asInt(value, param, min, max) {
  if (typeof value === 'string' && /^-?\d+$/.test(value.trim())) value = Number(value);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new NodeConfigError(`${param}: expected a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return value;
}

// Letters NFKD does not take apart into a base letter and a mark.
const ASCII_FOLD = {
  ß: 'ss', æ: 'ae', Æ: 'AE', ø: 'o', Ø: 'O', œ: 'oe', Œ: 'OE', đ: 'd', Đ: 'D', ł: 'l', Ł: 'L',
  þ: 'th', Þ: 'TH', ð: 'd', Ð: 'D', ı: 'i',
};

/** "Crème Brûlée, 2nd edition!" -> "creme-brulee-2nd-edition". */
function slugify(text, { separator = '-', lowercase = true, ascii = true, maxLength = 0 } = {}) {
  if (typeof separator !== 'string' || separator.length > MAX_SEPARATOR_CHARS) {
    throw new NodeConfigError(`separator: at most ${MAX_SEPARATOR_CHARS} characters`);
  }
  let s = text.normalize('NFKD').replace(/\p{M}+/gu, '');
  if (ascii) s = s.replace(/[^\x00-\x7F]/g, (c) => ASCII_FOLD[c] ?? ' ');
  if (lowercase) s = s.toLowerCase();
  // An apostrophe inside a word joins it: "don't" -> "dont", not "don-t".
  s = s.replace(/(?<=[\p{L}\p{N}])['’](?=[\p{L}\p{N}])/gu, '');
  const words = s.split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  let slug = words.join(separator);
  if (maxLength > 0 && slug.length > maxLength) {
    slug = slug.slice(0, maxLength);
    // Never end on half a separator or a lone separator.
    if (separator) {
      while (slug.endsWith(separator)) slug = slug.slice(0, -separator.length);
      for (let i = separator.length - 1; i > 0; i--) {
        if (slug.endsWith(separator.slice(0, i))) { slug = slug.slice(0, -i); break; }
      }
    }
  }
  return slug;
}

let wordSegmenter = null;

/** Words (Unicode word segmentation, so "東京タワー" counts its words too),
 * characters (code points) and lines (a final newline ends a line, it does
 * not start one). */
function countWords(text) {
  wordSegmenter ??= new Intl.Segmenter(undefined, { granularity: 'word' });
  let words = 0;
  for (const seg of wordSegmenter.segment(text)) if (seg.isWordLike) words += 1;
  let characters = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // A high surrogate followed by a low one is one character.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i += 1;
    }
    characters += 1;
  }
  let lines = 0;
  if (text.length) {
    lines = text.split(/\r\n|\r|\n/).length;
    if (/(\r\n|\r|\n)$/.test(text)) lines -= 1;
  }
  return { words, characters, lines };
}

const CASES = ['upper', 'lower', 'title'];

function changeCase(text, mode) {
  switch (mode) {
    case 'upper': return text.toUpperCase();
    case 'lower': return text.toLowerCase();
    case 'title':
      // First letter of each word up, the rest down; "o'neil" stays one word.
      return text.toLowerCase().replace(/(^|[^\p{L}\p{N}'’])(\p{L})/gu, (m, before, letter) => before + letter.toUpperCase());
    default:
      throw new NodeConfigError(`mode: expected one of ${CASES.join(', ')}, got ${JSON.stringify(mode)}`);
  }
}

/**
 * Check a pattern and its flags and compile them (global). Cheap and bounded:
 * run in the caller's thread. Returns {regex, groups}.
 */
function compilePattern(pattern, flags = '', group = 0) {
  if (typeof pattern !== 'string' || !pattern) throw new NodeConfigError('pattern: no pattern given');
  if (pattern.length > MAX_PATTERN_CHARS) {
    throw new NodeConfigError(`pattern: ${pattern.length} characters, more than the limit of ${MAX_PATTERN_CHARS}`);
  }
  if (typeof flags !== 'string') throw new NodeConfigError('flags: expected text such as "i" or "im"');
  const seen = new Set();
  for (const f of flags) {
    if (!REGEX_FLAGS.has(f) || seen.has(f)) {
      throw new NodeConfigError(`flags: '${flags}' is not a set of i (ignore case), m (multiline), s (dot matches newline), u (unicode)`);
    }
    seen.add(f);
  }
  let regex;
  let groups;
  try {
    regex = new RegExp(pattern, `${flags}g`);
    // An empty alternative makes the pattern match "" so exec shows its groups.
    groups = new RegExp(`(?:${pattern})|`, flags).exec('').length - 1;
  } catch (err) {
    throw new NodeConfigError(`pattern: ${err.message}`);
  }
  if (group > groups) {
    throw new NodeConfigError(`group: ${group}, but the pattern has ${groups} group${groups === 1 ? '' : 's'}`);
  }
  return { regex, groups };
}

/** Every match of `pattern` in `text` (or its capture `group`; null where the
 * group took no part), at most `maxMatches`; `truncated` says there were more. */
function extractMatches(text, pattern, flags = '', group = 0, maxMatches = 100) {
  const { regex } = compilePattern(pattern, flags, group);
  const unicode = flags.includes('u');
  const matches = [];
  let truncated = false;
  let m;
  while ((m = regex.exec(text)) !== null) {
    if (matches.length >= maxMatches) {
      truncated = true;
      break;
    }
    matches.push(m[group] ?? null);
    if (m[0] === '') {
      // An empty match: step over one character, or exec finds it forever.
      const i = regex.lastIndex;
      const wide = unicode && i + 1 < text.length && text.codePointAt(i) > 0xffff;
      regex.lastIndex = i + (wide ? 2 : 1);
    }
  }
  return { matches, truncated };
}

module.exports = {
  slugify, countWords, changeCase, compilePattern, extractMatches, asText, asInt, CASES,
  MAX_TEXT_CHARS, MAX_PATTERN_CHARS, MAX_MATCHES,
};
