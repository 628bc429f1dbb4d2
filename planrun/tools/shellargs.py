"""How the shell tool renders its arguments: a value interpolated into a string `cmd`, or into
the script(s) of a `run` step, goes in as data (planrun/tools/shellquote.py: inert text in place,
anything else by environment variable), quoted by its context in the command."""

from __future__ import annotations

# Lazy import (inside a function), for start-up time: the shell lexer only for a command
# that interpolates a value.
from typing import Any

from planrun.plan.expressions import (
    Evaluate,
    ExpressionError,
    Template,
    Unknown,
    Words,
    parse_template,
    render_value,
    to_text,
)


def render_shell_args(args: dict[str, Any], evaluate: Evaluate) -> dict[str, Any]:
    """The shell tool's arguments rendered: `cmd` (or `run`) quoted by context, the rest plain."""
    if "run" in args:
        return _render_run(args, evaluate)
    cmd = args.get("cmd")
    tpl = _template(cmd, "cmd") if isinstance(cmd, str) else None
    if tpl is None or tpl.whole is not None:
        rendered: dict[str, Any] = render_value(args, evaluate, ("args",), keys=True)
        return rendered
    rest = render_value(
        {k: v for k, v in args.items() if k != "cmd"}, evaluate, ("args",), keys=True
    )
    texts, unknown = _texts(tpl, evaluate, "args.cmd", 0)
    return shell_args(tpl, texts, rest, unknown)


def _template(text: str, at: str) -> Template | None:
    try:
        return parse_template(text)
    except ExpressionError as exc:
        raise ExpressionError(exc.message, name=exc.name, at=at) from None


def _texts(
    tpl: Template, evaluate: Evaluate, where: str, offset: int
) -> tuple[list[str | list[str]], frozenset[int]]:
    """Each value's text (Words: a list of words), and which are placeholders (numbered from
    `offset`)."""
    texts: list[str | list[str]] = []
    unknown: set[int] = set()
    for part in tpl.exprs:
        try:
            value = evaluate(part)
        except ExpressionError as exc:
            raise ExpressionError(f"{where}: {exc.message}", name=exc.name) from None
        if isinstance(value, Unknown):
            unknown.add(offset + len(texts))
        texts.append(list(value) if isinstance(value, Words) else to_text(value))
    return texts, frozenset(unknown)


def _render_run(args: dict[str, Any], evaluate: Evaluate) -> dict[str, Any]:
    """A `run` step's args: each script with its values quoted by context (a list's values
    numbered across the list, so that no two scripts' environment values share a name).
    Every script is parsed, then every value evaluated, then each script quoted."""
    run = args["run"]
    scripts = [run] if isinstance(run, str) else list(run)
    rest = render_value(
        {k: v for k, v in args.items() if k != "run"}, evaluate, ("args",), keys=True
    )
    templates = [_template(s, "run") for s in scripts]
    wheres = ["run" if isinstance(run, str) else f"run[{n}]" for n in range(len(scripts))]
    texts: list[str | list[str]] = []
    unknown: frozenset[int] = frozenset()
    offsets: list[int] = []
    for tpl, where in zip(templates, wheres, strict=True):
        offsets.append(len(texts))
        if tpl is not None:
            more, placeholders = _texts(tpl, evaluate, where, len(texts))
            texts.extend(more)
            unknown |= placeholders
    env: dict[str, str] = {}
    for n, tpl in enumerate(templates):
        if tpl is None:
            scripts[n] = scripts[n].replace("$${", "${")
            continue
        quoted = shell_args(tpl, texts, {}, unknown, offset=offsets[n], where=wheres[n])
        scripts[n] = quoted["cmd"]
        env.update(quoted.get("env") or {})
    return _with_env({"run": scripts[0] if isinstance(run, str) else scripts, **rest}, env)


def _with_env(out: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """`out` with the values passed by environment variable merged over the step's own `env`."""
    if env:
        own = out.get("env")
        out["env"] = {**own, **env} if isinstance(own, dict) else env if own is None else own
    return out


def shell_args(
    tpl: Template,
    texts: list[str | list[str]],
    rest: dict[str, Any],
    unknown: frozenset[int] = frozenset(),
    *,
    offset: int = 0,
    where: str = "args.cmd",
) -> dict[str, Any]:
    """`{cmd, **rest}` with the values `texts` put into the command template safely (a list:
    Words, one value a word); the values passed by environment variable are merged into `env`
    (over the step's own). The template's values are `texts[offset:]`; the words of the ones
    before keep their numbers (a `run` list's scripts never share a value's name)."""
    from planrun.tools.shellquote import Hole, Item, QuotingError, quote_command

    items: list[Item] = []  # the template's characters, a Hole for each value's word
    flat: list[str] = [word for t in texts[:offset] for word in (t if isinstance(t, list) else [t])]
    unknown_flat: set[int] = set()
    n = offset
    for part in tpl.parts:
        if isinstance(part, str):
            items.extend(part)
            continue
        text = texts[n]
        for j, word in enumerate(text if isinstance(text, list) else [text]):
            if j:
                items.append(" ")
            if n in unknown:
                unknown_flat.add(len(flat))
            items.append(Hole(len(flat)))
            flat.append(word)
        n += 1
    try:
        cmd, env = quote_command(items, flat, frozenset(unknown_flat))
    except QuotingError as exc:
        raise ExpressionError(
            f"{where}: {exc}", at=where.removeprefix("args.").split("[")[0]
        ) from None
    return _with_env({"cmd": cmd, **rest}, env)
