"""`planrun init`: a commented starter plan that validates and runs as written."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: PyYAML only to write a starter plan.
import json

from planrun.errors import UsageError
from planrun.plan.discovery import PLAN_EXTENSIONS
from planrun.plan.schemafile import write_new

# A path, not a URL: `planrun init` writes the schema there (planrun/plan/schemafile.py), and the
# YAML language server reads it from the plan's directory, offline.
SCHEMA_REF = "./plan.schema.json"

STARTER_YAML = f"""\
# yaml-language-server: $schema={SCHEMA_REF}
# A planrun plan: each step runs a command (`run:`) or calls a tool (`tool:` and `args:`);
# steps run in parallel as soon as the steps they depend on are done. Editors with the YAML
# language server check and complete this file with the schema above, written beside it by
# `planrun init` (after an upgrade: `planrun schema > plan.schema.json`).
#
#   planrun list                      the steps of this plan
#   planrun run                       the `default` steps and what they depend on
#   planrun run test                  only `test` and what it depends on
#   planrun run test -- -k fast       the words after -- are ${{cli_args}}
#   planrun run --var version=1.2.0   a param from the command line
#   planrun run --dry-run             what would run, in parallel waves
#   planrun report                    an HTML timeline of the last run
version: 1
title: Starter plan

# What `planrun run` runs when no step is named (without it: every step).
default: [package]

# The plan's command line: planrun run --var version=1.2.0
params:
  version: {{default: 0.1.0, description: The version to package}}

# Values steps read as ${{name}}; override them with --var name=value.
variables:
  greeting: hello

# KEY=VALUE files added to the steps' environment and to ${{env.KEY}};
# a name ending in ? is optional. The environment planrun runs in wins.
dotenv: [".env?"]

# Every step's environment; a step's own `env:` wins over it.
env:
  PYTHONDONTWRITEBYTECODE: "1"

# What every step gets unless it says otherwise.
defaults:
  timeout: 5m
  retries: 0
  on_failure: abort          # abort | continue | ignore | replan

steps:
  - id: hello
    title: Say ${{greeting}}
    run: echo "${{greeting}} from planrun"

  - id: lint
    description: Lint the code
    run: echo "lint - replace me with your linter"

  - id: test
    description: Run the tests
    depends_on: [lint]       # after lint; hello runs alongside
    retries: 1               # one more attempt if it fails
    run: echo "test - replace me with your test command" ${{cli_args}}

  - id: package
    title: Package ${{version}}
    depends_on: [hello, test]
    run:                     # a list: one command after another, the first failure stops it
      - mkdir -p dist
      - echo "packaging version ${{version}}" > dist/package-${{version}}.txt
    # The step is cached: an unchanged run takes it, and its outputs, from the cache.
    # sources: ["src/**"]    # the files it reads: a change to one runs it again
    outputs: ["dist/package-${{version}}.txt"]

  - id: publish
    description: Not a default step; it asks first (--yes answers for you)
    depends_on: [package]
    approval: Publish version ${{version}}?
    run: echo "publish dist/package-${{version}}.txt - replace me"
"""


def starter_text(path: str) -> str:
    """The starter plan for `path`: commented YAML, or the same plan as JSON for a .json name."""
    if path.lower().endswith(".json"):
        import yaml

        return json.dumps(yaml.safe_load(STARTER_YAML), indent=2) + "\n"
    return STARTER_YAML


def write_starter(path: str) -> None:
    """Create `path` with the starter plan, whole or not at all (schemafile.write_new);
    UsageError if it exists (never overwritten) or cannot be written (nothing is left then)."""
    if not path.lower().endswith(PLAN_EXTENSIONS):
        raise UsageError(f"a plan file name ends in .yaml, .yml or .json: {path}")
    try:
        written = write_new(path, starter_text(path).encode())
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not written:
        raise UsageError(f"{path} already exists: not overwriting it")
