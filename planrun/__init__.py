"""planrun: run declarative plan files as parallel, resumable tool-call graphs.

The library API (`load_plan`, `validate_plan`, `run_plan`) is imported lazily so that
`import planrun` and `planrun --help` stay fast.
"""

# No imports at all here, `__future__` included: this module runs at every start before
# planrun.__main__ installs its Ctrl-C handler, and each import widens that moment.
TYPE_CHECKING = False  # not `typing`

__version__ = "0.1.0"
__all__ = ["load_plan", "validate_plan", "run_plan", "RunRequest", "Diagnostic", "ExitCode"]

if TYPE_CHECKING:
    from typing import Any

    from planrun.errors import Diagnostic, ExitCode
    from planrun.plan.validate import load_plan, validate_plan
    from planrun.run.runner import RunRequest


def run_plan(path: str, **options: "Any") -> "tuple[dict[str, Any], Any]":
    """Run the plan at `path` (RunRequest options as keywords); returns (document, exit code)."""
    import asyncio

    from planrun.run.runner import RunRequest, execute

    options.setdefault("console", False)
    return asyncio.run(execute(RunRequest(plan=path, **options)))


def __getattr__(name: str) -> "Any":
    if name in ("load_plan", "validate_plan"):
        from planrun.plan import validate

        return getattr(validate, name)
    if name == "RunRequest":
        from planrun.run.runner import RunRequest

        return RunRequest
    if name in ("Diagnostic", "ExitCode"):
        from planrun import errors

        return getattr(errors, name)
    raise AttributeError(name)
