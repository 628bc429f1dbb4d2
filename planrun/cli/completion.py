"""Shell completion: the scripts for bash, zsh and fish, and the values planrun completes.

Click does the protocol; these callbacks add plan files and the step ids of the plan on the
command line (or of the default plan) after `--only`, `--force` and as `run` targets.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: click's completion, the loader and the plan
# definition only while completing.
import os
import re
from typing import Any

from planrun.errors import PlanrunError
from planrun.plan.discovery import PLAN_EXTENSIONS, find_plan_upwards, looks_like_plan

COMPLETE_VAR = "_PLANRUN_COMPLETE"
MAX_PLAN_BYTES = 16 << 20  # completion must stay instant: larger plans are not read


def completion_script(cli: Any, shell: str) -> str:
    """The script that makes `shell` complete planrun's commands, options, files and step ids."""
    from click.shell_completion import get_completion_class

    from planrun.cli.completion_shells import BashCompletion, FishCompletion

    ours = {"bash": BashCompletion, "fish": FishCompletion}
    cls = ours.get(shell) or get_completion_class(shell)
    if cls is None:  # pragma: no cover - `completion` offers only shells click knows
        raise ValueError(f"unsupported shell {shell!r}")
    return str(cls(cli, {}, "planrun", COMPLETE_VAR).source())


def _base_dir(ctx: Any) -> str:
    """Where the command will run: `-C DIR` if given (not applied while completing)."""
    root = ctx.find_root()
    directories = root.params.get("directories") if root is not None else None
    return os.path.join(os.getcwd(), *directories) if directories else os.getcwd()


def _plan_on_line(ctx: Any, base: str) -> str | None:
    """The plan the command line names, else the default plan in `base`."""
    for key in ("plan", "target"):
        value = ctx.params.get(key)
        if isinstance(value, str) and looks_like_plan(value, base):
            return value
    for key in ("args", "plans"):
        values = ctx.params.get(key) or ()
        if values and looks_like_plan(values[0], base):
            return str(values[0])
    # Before an option still waiting for its value (`run ci.yaml --only <TAB>`), click leaves
    # the positional words unparsed, in ctx.args.
    words = [w for w in ctx.args if not w.startswith("-")]
    if words and looks_like_plan(words[0], base):
        return str(words[0])
    found = find_plan_upwards(base)  # the default plan, here or in a parent, as a run finds it
    return os.path.join(*found) if found is not None else None


def step_ids(path: str) -> list[str]:
    """The step ids and aliases of the plan file at `path` as written, internal steps left
    out (they are no target); [] when it cannot be read."""
    from planrun.plan.definition import STEP_ID_PATTERN
    from planrun.plan.loader import load_document

    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_PLAN_BYTES:
            return []
        data = load_document(path).data
    except (PlanrunError, OSError, ValueError):
        return []
    steps = data.get("steps") if isinstance(data, dict) else None
    ids = []
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict) and step.get("internal") is not True:  # never a target
            aliases = step.get("aliases")
            names = [step.get("id", step.get("index"))]
            names += aliases if isinstance(aliases, list) else []
            for sid in names:
                # only well-formed ids: the shell's script reads one value a line, and a hostile
                # plan's `$(...)` or newline is no step id anyway
                well_typed = isinstance(sid, str | int) and not isinstance(sid, bool)
                if well_typed and re.fullmatch(STEP_ID_PATTERN, str(sid)):
                    ids.append(str(sid))
    return ids


def plan_files(base: str, incomplete: str) -> list[tuple[str, str]]:
    """(value, kind) for plan files and directories starting with `incomplete`."""
    head, tail = os.path.split(incomplete)
    where = os.path.join(base, head) if head else base
    try:
        names = sorted(os.listdir(where))
    except OSError:
        return []
    out = []
    for name in names:
        if not name.startswith(tail) or (name.startswith(".") and not tail.startswith(".")):
            continue
        if not name.isprintable():  # a newline would split the value in the shell's script
            continue
        value = os.path.join(head, name) if head else name
        if os.path.isdir(os.path.join(where, name)):
            out.append((value + "/", "dir"))
        elif name.lower().endswith(PLAN_EXTENSIONS):
            out.append((value, "plain"))
    return out


def _items(pairs: list[tuple[str, str]]) -> list[Any]:
    from click.shell_completion import CompletionItem

    # Directories are offered as plain text ending in "/", so that bash keeps completing inside.
    return [CompletionItem(value, type="plain") for value, _kind in pairs]


def _ids(ctx: Any, incomplete: str) -> list[tuple[str, str]]:
    base = _base_dir(ctx)
    plan = _plan_on_line(ctx, base)
    if plan is None:
        return []
    path = plan if os.path.isabs(plan) else os.path.join(base, plan)
    return [(sid, "plain") for sid in step_ids(path) if sid.startswith(incomplete)]


def complete_step_ids(ctx: Any, param: Any, incomplete: str) -> list[Any]:
    """`--only ID`, `--force ID`: the step ids of the plan on the command line."""
    return _items(_ids(ctx, incomplete))


def complete_plan_files(ctx: Any, param: Any, incomplete: str) -> list[Any]:
    """A PLAN argument: plan files (.yaml, .yml, .json) and directories."""
    return _items(plan_files(_base_dir(ctx), incomplete))


def looks_like_a_path(word: str) -> bool:
    """A word being typed as a path (`./`, `../x`, `plans/`, `~/`), not as a step id."""
    return "/" in word or word.startswith((".", "~"))


def complete_run_args(ctx: Any, param: Any, incomplete: str) -> list[Any]:
    """`run [PLAN] [ID ...]`: the step ids of the plan (the default plan's first); plan files
    only for a first word that looks like a path, or that starts no step id."""
    before = ctx.params.get("args") or ()
    if before:
        return _items(_ids(ctx, incomplete))
    if looks_like_a_path(incomplete):
        return _items(plan_files(_base_dir(ctx), incomplete))
    ids = _ids(ctx, incomplete)
    files = [(v, kind) for v, kind in plan_files(_base_dir(ctx), incomplete) if kind != "dir"]
    return _items(ids or files)
