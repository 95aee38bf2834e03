"""A module fixture's set-up runs on its own budget, not on the test's timeout (tests/budgets.py)."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = "from tests.conftest import pytest_fixture_setup  # noqa: F401\n"

TESTS = textwrap.dedent('''
    import threading

    import pytest

    from tests.budgets import setup_budget

    never = threading.Event()


    @pytest.fixture(scope="module")
    @setup_budget(30)
    def slow_but_within_budget():
        never.wait(2.5)  # longer than the test's timeout, shorter than the fixture's budget
        return "ready"


    @pytest.fixture(scope="module")
    @setup_budget(1)
    def over_budget():
        never.wait(60)


    def test_a_fixture_within_its_budget_does_not_count_against_the_test(slow_but_within_budget):
        assert slow_but_within_budget == "ready"


    def test_the_test_timeout_still_holds_after_the_fixture(slow_but_within_budget):
        never.wait(4)


    def test_a_fixture_over_its_budget_fails_naming_itself(over_budget):
        pass
''')


def test_module_fixtures_set_up_on_their_own_budget(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_budgeted.py").write_text(TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "timeout",
                           "--timeout", "2", "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    out = done.stdout
    outcomes = dict(line.split(" ", 1)[0].split("::")[1:] + [line.split(" ")[1]]
                    for line in out.splitlines() if line.startswith("test_budgeted.py::") and " " in line)
    assert outcomes == {"test_a_fixture_within_its_budget_does_not_count_against_the_test": "PASSED",
                        "test_the_test_timeout_still_holds_after_the_fixture": "FAILED",
                        "test_a_fixture_over_its_budget_fails_naming_itself": "ERROR"}, out
    # the test's own timeout resumed ("Timeout >2.0s" before pytest-timeout 2.3)
    assert re.search(r"Failed: Timeout \(?>2\.0s", out), out
    where = out[out.index("the module fixture over_budget did not set up within its budget of 1 s "
                          "(tests/budgets.py); it was at:"):]
    assert "in over_budget\n    never.wait(60)" in where, out  # where the fixture's code was
