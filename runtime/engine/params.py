"""A node's params as a run gives them: ``{flow_dir}`` and ``{workspace}``
in a fixed value become the flow file's folder and the run's workspace
(``runtime.engine.core`` applies both as it builds each node).
"""

from __future__ import annotations

from ..spec import ParamValue, Scope

FLOW_DIR = "{flow_dir}"


WORKSPACE = "{workspace}"


def expand_workspace(params: dict[str, ParamValue], run_id: str) -> dict[str, ParamValue]:
    """``{workspace}`` in a fixed text value is this run's workspace folder
    (runtime.workspace), made when a node names it: where tools write the
    documents agents pass to each other."""
    if not any(v.scope is Scope.CUSTOM and isinstance(v.value, str) and WORKSPACE in v.value
               for v in params.values()):
        return params
    from ..workspace import workspace_root

    root = workspace_root(run_id)
    root.mkdir(parents=True, exist_ok=True)
    return {k: v.model_copy(update={"value": v.value.replace(WORKSPACE, str(root))})
            if v.scope is Scope.CUSTOM and isinstance(v.value, str) else v
            for k, v in params.items()}


def expand_flow_dir(params: dict[str, ParamValue], flow_dir: str) -> dict[str, ParamValue]:
    """``{flow_dir}`` in a fixed text value is the folder of the flow file
    (the working folder for a flow never saved), so that a flow shipped with
    its data (pages, workbooks) finds them wherever it is copied."""
    fixed = (Scope.CUSTOM, Scope.EXPRESSION)
    if not any(v.scope in fixed and isinstance(v.value, str) and FLOW_DIR in v.value
               for v in params.values()):
        return params
    # In a template the folder is literal text, even if its name holds
    # braces or percent signs that Jinja would read as its own syntax.
    in_template = flow_dir if not set(flow_dir) & set("{}%#") \
        else "{% raw %}" + flow_dir + "{% endraw %}"
    return {k: v.model_copy(update={"value": v.value.replace(
                FLOW_DIR, flow_dir if v.scope is Scope.CUSTOM else in_template)})
            if v.scope in fixed and isinstance(v.value, str) else v
            for k, v in params.items()}
