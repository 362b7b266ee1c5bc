'use strict';
/**
 * textkit: text nodes for Switchboard, written in JavaScript and run out of
 * process over the plugin protocol. `node index.js` serves them; requiring
 * this file only declares them (tests).
 */

const sb = require('./switchboard');
const text = require('./text');
const { RegexRunner } = require('./regex_worker');

const { AI, CUSTOM, MESSAGE } = sb;
const CATEGORY = 'Text';
const COLOR = '#4f7cac';

// The text a node works on: from the message by default, and the AI's to
// give when the node is an agent's tool.
const textParam = (description) => sb.param('str', description,
  { allow: AI | CUSTOM | MESSAGE, scope: 'message', path: 'payload', multiline: true });

sb.node('text.slugify', {
  name: 'Slugify',
  category: CATEGORY,
  description: 'Turns a title into a URL slug: "Crème Brûlée, 2nd edition!" becomes '
    + '"creme-brulee-2nd-edition". Accents are dropped, everything that is not a letter '
    + 'or digit becomes one separator.',
  icon: 'edit',
  color: COLOR,
  tool: sb.tool('slugify', 'Turn a title or any text into a URL slug, e.g. "Hello, World!" -> "hello-world"'),
  params: {
    text: textParam('The text to turn into a slug'),
    separator: sb.param('str', 'Put between words (at most 8 characters)', { default: '-' }),
    lowercase: sb.param('bool', 'Lower-case the slug', { default: true }),
    ascii: sb.param('bool', 'Keep ASCII letters and digits only (é becomes e, ß becomes ss); off: keep every letter', { default: true }),
    max_length: sb.param('int', 'Longest slug in characters, cut at a word where it can; 0: no limit', { default: 0 }),
  },
  outputs: {
    slug: sb.output('str', 'The slug'),
  },
  onMessage(msg) {
    const slug = text.slugify(text.asText(this.text.get(msg), 'text'), {
      separator: text.asText(this.separator.get(msg) ?? '', 'separator'),
      lowercase: this.lowercase.get(msg) !== false,
      ascii: this.ascii.get(msg) !== false,
      maxLength: text.asInt(this.max_length.get(msg) ?? 0, 'max_length', 0, 1_000_000),
    });
    this.slug.set(msg, slug);
  },
});

sb.node('text.word_count', {
  name: 'Word Count',
  category: CATEGORY,
  description: 'Counts the words, characters and lines of a text. Words follow Unicode word '
    + 'boundaries, so text without spaces (Chinese, Japanese) is counted by its words too.',
  icon: 'gauge',
  color: COLOR,
  tool: sb.tool('count_words', 'Count the words, characters and lines of a text'),
  params: {
    text: textParam('The text to count'),
  },
  outputs: {
    words: sb.output('int', 'Number of words'),
    characters: sb.output('int', 'Number of characters (Unicode code points)'),
    lines: sb.output('int', 'Number of lines'),
  },
  onMessage(msg) {
    const counts = text.countWords(text.asText(this.text.get(msg), 'text'));
    this.words.set(msg, counts.words);
    this.characters.set(msg, counts.characters);
    this.lines.set(msg, counts.lines);
  },
});

// One worker for every regex_extract node of the process (see regex_worker.js).
const regexRunner = new RegexRunner();

sb.node('text.regex_extract', {
  name: 'Regex Extract',
  category: CATEGORY,
  description: 'Finds every match of a regular expression (JavaScript syntax) in a text and '
    + 'sends the matches, or one capture group of each, as a list. At most max_matches '
    + `(up to ${text.MAX_MATCHES}); a pattern may have up to ${text.MAX_PATTERN_CHARS} `
    + 'characters and must finish within the time limit.',
  icon: 'search',
  color: COLOR,
  tool: sb.tool('extract_matches',
    'Find every match of a regular expression (JavaScript syntax) in a text; returns the matches or one capture group of each'),
  params: {
    text: textParam('The text to search'),
    pattern: sb.param('str', 'The regular expression, e.g. [\\w.+-]+@[\\w-]+\\.[\\w.]+ for email addresses',
      { allow: AI | CUSTOM | MESSAGE, scope: 'custom' }),
    flags: sb.param('str', 'Any of i (ignore case), m (^ and $ at each line), s (. matches newlines), u (Unicode)',
      { allow: AI | CUSTOM | MESSAGE, scope: 'custom', default: '' }),
    group: sb.param('int', 'The capture group to return: 0 the whole match, 1 the first group, ...',
      { allow: AI | CUSTOM | MESSAGE, scope: 'custom', default: 0 }),
    max_matches: sb.param('int', `Most matches returned, 1 to ${text.MAX_MATCHES}`, { default: 100 }),
    timeout_seconds: sb.param('float', 'Time limit of one search, 0.01 to 60 seconds', { default: 5.0 }),
  },
  outputs: {
    matches: sb.output('json', 'The matches (or the group of each; null where the group did not take part)'),
    count: sb.output('int', 'Number of matches returned'),
    truncated: sb.output('bool', 'True when there were more matches than max_matches'),
  },
  async onMessage(msg, { signal }) {
    const source = text.asText(this.text.get(msg), 'text');
    const pattern = this.pattern.get(msg);
    const flags = this.flags.get(msg) ?? '';
    const group = text.asInt(this.group.get(msg) ?? 0, 'group', 0, 1000);
    const maxMatches = text.asInt(this.max_matches.get(msg) ?? 100, 'max_matches', 1, text.MAX_MATCHES);
    const seconds = Number(this.timeout_seconds.get(msg) ?? 5);
    if (!(seconds >= 0.01 && seconds <= 60)) {
      throw new sb.NodeConfigError(`timeout_seconds: expected 0.01 to 60, got ${seconds}`);
    }
    // Checked here first, so that a bad pattern costs no trip to the worker.
    text.compilePattern(pattern, flags, group);
    const found = await regexRunner.run([source, pattern, flags, group, maxMatches],
      { timeoutMs: Math.round(seconds * 1000), signal });
    this.matches.set(msg, found.matches);
    this.count.set(msg, found.matches.length);
    this.truncated.set(msg, found.truncated);
  },
});

sb.node('text.case', {
  name: 'Change Case',
  category: CATEGORY,
  description: 'Writes a text in upper case, lower case or title case.',
  icon: 'template',
  color: COLOR,
  tool: sb.tool('change_case', 'Write a text in upper case, lower case or title case'),
  params: {
    text: textParam('The text to change'),
    mode: sb.param('str', 'upper, lower or title (each word capitalized)',
      { choices: text.CASES, default: 'lower', allow: AI | CUSTOM | MESSAGE, scope: 'custom' }),
  },
  outputs: {
    result: sb.output('str', 'The text in the chosen case'),
  },
  onMessage(msg) {
    this.result.set(msg, text.changeCase(text.asText(this.text.get(msg), 'text'), this.mode.get(msg)));
  },
});

const PACKAGE = { name: 'textkit', version: require('./package.json').version };

if (require.main === module) sb.serve(PACKAGE);

module.exports = { PACKAGE, regexRunner };
