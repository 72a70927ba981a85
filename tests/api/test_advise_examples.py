"""Each examples/advise-*.yaml reproduces what its comments claim: every line
``# expect[ with FIELD=VALUE, ...]: CLAIM`` is checked against the advisor, where CLAIM is
``S first`` (the pick) or ``A > B > C; X, Y OOM`` (among the strategies named: those that
fit rank in this order, the others do not fit)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ppsched.solver.advisor import advise, parse_advisor_config, set_field, winner

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("advise-*.yaml"))
EXPECT = re.compile(r"^# expect(?: with (?P<changes>[^:]+))?: (?P<claim>.+)$")


def claims(path: Path) -> list[tuple[str, str]]:
    return [(m["changes"] or "", m["claim"].strip()) for line in path.read_text().splitlines()
            if (m := EXPECT.match(line))]


def test_there_are_examples_with_claims() -> None:
    assert EXAMPLES and all(claims(p) for p in EXAMPLES)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_reproduces_its_claims(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    for changes, claim in claims(path):
        config_data = data
        for change in filter(None, (c.strip() for c in changes.split(","))):
            field, _, value = change.partition("=")
            config_data = set_field(config_data, field, yaml.safe_load(value))
        ranked = advise(parse_advisor_config(config_data))
        if claim.endswith(" first"):
            assert winner(ranked) == claim.removesuffix(" first"), (changes, claim)
            continue
        order_text, _, oom_text = claim.partition(";")
        order = [s.strip() for s in order_text.split(">")]
        oom = [s.strip() for s in oom_text.removesuffix("OOM").split(",") if s.strip()]
        named = [c for c in ranked if c.strategy in {*order, *oom}]
        assert [c.strategy for c in named if c.fits] == order, (changes, claim)
        assert sorted(c.strategy for c in named if not c.fits) == sorted(oom), claim
