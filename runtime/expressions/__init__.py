"""Template expressions: the fourth way to set a param, and Switchboard's one
template engine (the Template node renders with it too: ``TextTemplate``).

``{"scope": "expression", "value": "Hello {{ msg.payload.name }}"}`` is
rendered for every message with Jinja2 in an immutable sandbox. A template
sees four names and nothing else:

- ``msg``: the incoming message, without the reserved keys of tool calls (so
  a template cannot read the AI's arguments from ``__parameters__``);
- ``env``: the environment variables that the flow (``settings.env_readable``)
  or the user's settings name as readable, and a few harmless ones
  (``DEFAULT_READABLE_ENV``), less every one that names a secret (an
  allow-list, with the deny-list ``SECRET_NAME`` as a second guard; see
  ``template_env``);
- ``flow``: this run's flow variables (what Set Variable stores with scope
  flow), read-only;
- ``global``: the global variables (Set Variable with scope global).

A template that is one expression and nothing else (``{{ msg.payload.count
}}``) gives that expression's own value (an int stays an int); any other
template gives text. Either is then coerced to the param's type, so an int
param set to ``"{{ msg.payload.n }}"`` gets an int from ``"7"`` too.

The Template node's template (``TextTemplate``) sees the message's own keys
(``payload``, ``topic``) and ``msg`` (inside a subflow definition also
``subflow``, the instance's params), reads a missing key as empty text, and
always gives text; it has the same sandbox and the same bounds.

Bounds, the same for every template (``_Render`` keeps the counts of one
render; counts, not a clock, so that a template always stops at the same
place):

- at most ``MAX_TEMPLATE_CHARS`` characters of template
  (``MAX_TEXT_TEMPLATE_CHARS`` for the Template node's);
- at most ``MAX_STEPS`` steps: loop turns, macro calls, calls and filters;
- at most ``MAX_WORK`` units of work: the characters and items that the
  render's operations build, copy, scan, compare or turn into text;
- no value of more than ``MAX_VALUE`` characters or items, counted through
  every level of nesting (a list held three times in another counts three
  times: about the size of its text), and no whole number of more than
  ``MAX_INT_DIGITS`` digits. The operations that could build one (``*``,
  ``+``, ``**``, ``~``, ``%``, ``str.format``, list and dict literals,
  ``join``, ``center``, ``indent``, ``replace``, ``tojson``, ...) are
  checked *before* they build it;
- at most ``MAX_VALUE`` characters of text out.

Constant parts are worked out under the same bounds when a template is
compiled (``switchboard validate``, the designer's Problems), so that a
constant that cannot be built (``{% set a = 2 ** 999999 %}``) is an error of
the flow, never of a run. A render that sees its run's deadline pass
(``switchboard run --timeout``: ``RUN_DEADLINE``) stops with
``RenderDeadline``, which the engine turns into the run's timeout with the
node's message unfinished (exit 124).

Templates cannot include, import or extend other templates (there is no
loader: nothing touches files), reach attributes starting with ``_``, or
change the data they read.

A template is compiled once per param (and once per distinct text in the
process: the compiled form is cached), never per message.

The package's modules, each importing only those listed after it:

- ``rendering``: a render under the bounds; ``Expression`` (a param's
  template, its value coerced to the param's type), ``TextTemplate`` (the
  Template node's), ``coerce``.
- ``compiling``: ``compile_template`` and ``compile_text_template`` (once
  per text), constants worked out under the bounds; ``problem`` for
  validation.
- ``sandbox``: the sandboxed Jinja2 environments (``sandbox``,
  ``text_sandbox``).
- ``operations``: the operators, calls, filters and tests, checked before
  they build; ``context``: what a template sees besides the message (the
  env allow-list, the flow and global variables, ``ExpressionContext``).
- ``bounds``: the limits, the errors, the counts of one render, the sizes of
  values.

``runtime.expressions`` is the public face of the package: import from here.
"""

from __future__ import annotations

import time

from .bounds import (
    FOLD_WORK,
    MAX_INT_DIGITS,
    MAX_JSON_INDENT,
    MAX_STEPS,
    MAX_TEMPLATE_CHARS,
    MAX_TEXT_TEMPLATE_CHARS,
    MAX_VALUE,
    MAX_WORK,
    RUN_DEADLINE,
    ExpressionError,
    RenderDeadline,
)
from .compiling import Compiled, compile_template, compile_text_template, problem
from .context import (
    DEFAULT_READABLE_ENV,
    FLOW_VARIABLES,
    GLOBAL_FILE,
    GLOBAL_MAX_BYTES,
    MAX_ENV_READABLE,
    ROOTS,
    SECRET_NAME,
    SETTINGS_FILE,
    SETTINGS_MAX_BYTES,
    ExpressionContext,
    default_context,
    env_pattern_problem,
    flow_env_readable,
    hidden_env_names,
    read_global_variables,
    template_env,
    user_env_readable,
)
from .rendering import Expression, TextTemplate, coerce
from .sandbox import sandbox, text_sandbox

#: The clock deadlines are read on (the engine's: time.monotonic). Renders
#: look it up here (bounds._clock), so that a clock set here is theirs.
_now = time.monotonic

#: The public names, wherever in the package they live.
__all__ = [
    "DEFAULT_READABLE_ENV", "FLOW_VARIABLES", "FOLD_WORK", "GLOBAL_FILE", "GLOBAL_MAX_BYTES",
    "MAX_ENV_READABLE", "MAX_INT_DIGITS", "MAX_JSON_INDENT", "MAX_STEPS", "MAX_TEMPLATE_CHARS",
    "MAX_TEXT_TEMPLATE_CHARS", "MAX_VALUE", "MAX_WORK", "ROOTS", "RUN_DEADLINE", "SECRET_NAME",
    "SETTINGS_FILE", "SETTINGS_MAX_BYTES",
    "Compiled", "Expression", "ExpressionContext", "ExpressionError", "RenderDeadline",
    "TextTemplate",
    "coerce", "compile_template", "compile_text_template", "default_context",
    "env_pattern_problem", "flow_env_readable", "hidden_env_names", "problem",
    "read_global_variables", "sandbox", "template_env", "text_sandbox", "user_env_readable",
]
