"""The test matrix's time budget (scripts/matrix.py): CI gives `make test` a budget in
minutes, and a stack that would end past it is skipped with a SKIP line that says so,
rather than the whole run being cut off by CI's limit with no verdict at all."""
from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import ROOT


def _matrix():
    spec = importlib.util.spec_from_file_location("tfp_picklefix_matrix",
                                                  os.path.join(ROOT, "scripts", "matrix.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


m = _matrix()
BUDGET = 80 * 60.0


def test_without_a_budget_every_stack_runs():
    for stack in m.DEFAULT_RUN:
        assert m.budget_verdict(stack, 10 * BUDGET, [("modern", 5 * BUDGET)], None) is None


def test_the_required_stack_runs_whatever_the_budget():
    assert m.STACKS["modern"].get("required")
    assert m.budget_verdict("modern", 2 * BUDGET, [], BUDGET) is None


def test_a_stack_runs_when_it_ends_within_the_budget_at_the_pace_so_far():
    usual = m.USUAL_SECONDS
    ran = [("modern", usual["modern"]), ("legacy-0.11", usual["legacy-0.11"])]
    # the same stacks, at their usual pace: mid-0.23 fits with a second to spare...
    assert m.budget_verdict("mid-0.23", BUDGET - usual["mid-0.23"] - 1, ran, BUDGET) is None
    # ...and not a second later
    why = m.budget_verdict("mid-0.23", BUDGET - usual["mid-0.23"] + 1, ran, BUDGET)
    assert why is not None and why.startswith("not run: the time budget")
    assert "TFP_PICKLEFIX_TIME_BUDGET=80 min" in why and "make test STACKS=mid-0.23" in why


def test_the_usual_times_are_scaled_by_the_pace_of_the_stacks_that_ran():
    usual = m.USUAL_SECONDS
    elapsed = BUDGET - 2 * usual["mid-0.17"]  # room for twice its usual time
    at_usual_pace = [("modern", usual["modern"])]
    three_times_slower = [("modern", 3 * usual["modern"])]
    assert m.budget_verdict("mid-0.17", elapsed, at_usual_pace, BUDGET) is None
    why = m.budget_verdict("mid-0.17", elapsed, three_times_slower, BUDGET)
    assert why is not None and "3.0x" in why


def test_a_cheaper_stack_after_a_skipped_one_still_runs():
    usual = m.USUAL_SECONDS
    assert usual["numpy-substrate-0.11"] < usual["modern-py313"]
    elapsed = BUDGET - (usual["numpy-substrate-0.11"] + usual["modern-py313"]) / 2
    ran = [("modern", usual["modern"])]
    assert m.budget_verdict("modern-py313", elapsed, ran, BUDGET) is not None
    assert m.budget_verdict("numpy-substrate-0.11", elapsed, ran, BUDGET) is None


def test_every_default_stack_has_a_usual_time_and_a_place_in_the_run():
    defaults = sorted(s for s in m.STACKS if not m.STACKS[s].get("extended"))
    assert sorted(m.DEFAULT_RUN) == defaults == sorted(m.USUAL_SECONDS)
    assert m.DEFAULT_RUN[0] == m.DEFAULT_STACK


@pytest.mark.parametrize("raw,seconds", [("", None), ("80", 4800.0), (" 1.5 ", 90.0)])
def test_the_budget_is_read_in_minutes(monkeypatch, raw, seconds):
    monkeypatch.setenv("TFP_PICKLEFIX_TIME_BUDGET", raw)
    assert m.time_budget() == seconds


@pytest.mark.parametrize("raw", ["eighty", "0", "-5"])
def test_a_wrong_budget_stops_the_run(monkeypatch, raw):
    monkeypatch.setenv("TFP_PICKLEFIX_TIME_BUDGET", raw)
    with pytest.raises(SystemExit, match="TFP_PICKLEFIX_TIME_BUDGET"):
        m.time_budget()


class _Machine:
    """A clock, and stacks that take ``pace`` times their usual time on it."""

    def __init__(self, pace, fail_install=()):
        self.now, self.pace, self.fail_install, self.ran = 0.0, pace, set(fail_install), []

    def clock(self):
        return self.now

    def run(self, stack, deadline):
        assert deadline == BUDGET + m.HARD_STOP_GRACE
        self.ran.append(stack)
        if stack in self.fail_install:
            self.now += 30
            return "SKIP", "could not be installed"
        self.now += m.USUAL_SECONDS[stack] * self.pace
        return "PASS", "ok"


def test_at_the_usual_pace_every_default_stack_runs_within_ci_s_budget():
    machine = _Machine(pace=1.0)
    results = m.run_stacks(m.DEFAULT_RUN, BUDGET, machine.run, machine.clock)
    assert [v for _, v, _ in results] == ["PASS"] * len(m.DEFAULT_RUN)
    assert machine.now < BUDGET


def test_on_a_slow_day_stacks_are_skipped_with_a_reason_and_the_run_ends_in_budget():
    machine = _Machine(pace=3.0)
    results = m.run_stacks(m.DEFAULT_RUN, BUDGET, machine.run, machine.clock)
    skipped = [s for s, v, _ in results if v == "SKIP"]
    assert skipped and "modern" not in skipped
    assert machine.ran == [s for s in m.DEFAULT_RUN if s not in skipped]
    assert all("not run: the time budget" in d for _, v, d in results if v == "SKIP")
    assert machine.now <= BUDGET
    assert len(machine.ran) > 1


def test_a_stack_that_could_not_be_installed_leaves_the_pace_as_it_was():
    machine = _Machine(pace=1.0, fail_install={"legacy-0.11"})
    results = m.run_stacks(m.DEFAULT_RUN, BUDGET, machine.run, machine.clock)
    assert dict((s, v) for s, v, _ in results)["legacy-0.11"] == "SKIP"
    assert machine.ran == m.DEFAULT_RUN
