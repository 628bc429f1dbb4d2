"""Links in README.md, CONTRIBUTING.md and docs/: each leads to a file of the repository, and
to a heading that exists when it names one (as GitHub makes anchors); none leads outside, and
the pages speak for themselves (no page points at a document outside the repository)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation but `-` and `_`
    dropped, each space a `-`."""
    headings = re.findall(r"^#+ (.*)$", FENCE.sub("", page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text()))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_to_a_file_and_heading_of_the_repository(page):
    broken = []
    for target in links(page):
        if re.match(r"\w+:", target):
            broken.append(f"{target}: outside the repository")
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or ROOT not in file.parents:
            broken.append(f"{target}: no such file in the repository")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no such heading")
    assert broken == [], page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_at_a_contract_outside_the_repository(page):
    text = page.read_text()
    assert re.findall(r"\bSPEC\b|\.\./shared", text) == [], page.name
