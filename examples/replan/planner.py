"""A small deterministic planner for examples/replan/plan.yaml.

planrun runs it when a step with `on_failure: replan` fails. It reads the context on stdin
({goal, plan, failed_step, error, completed, variables, history}) and prints the steps that
replace every step not yet completed: here, fetch from the mirror instead of the primary.
"""

import json
import sys

context = json.load(sys.stdin)
failed = context["failed_step"]["id"]
if failed == "fetch_primary":
    steps = [
        {
            "id": "fetch_mirror",
            "title": "Fetch from the mirror instead",
            "tool": "shell",
            "args": {"cmd": "echo mirror-data"},
            "result_variable": "data",
            "expected_outcome": "the mirror answers",
        },
        {
            "id": "report",
            "tool": "echo",
            "args": {"value": "got ${data.stdout | trim}"},
            "depends_on": ["fetch_mirror"],
        },
    ]
else:
    steps = []  # nothing else to try: planrun ends the run with reason no_plan
json.dump(steps, sys.stdout)
