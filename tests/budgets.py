"""How long a module or session fixture's set-up may take: its own budget, not the test's.

pytest-timeout counts a module fixture's set-up in the first test that asks for it, so a test of a
few seconds failed when the clusters and the scenario it reads took minutes on a cold, loaded
machine. ``tests/conftest.py`` suspends the test's timeout while such a fixture sets up and gives
the fixture the budget written here instead (the sum of what its waits may take), and a fixture
over its budget fails naming itself and where it was.
"""

from __future__ import annotations

from typing import Callable, TypeVar

#: A module or session fixture without a budget of its own: as long as a test may take.
DEFAULT_SETUP_BUDGET_S = 300.0

F = TypeVar("F", bound=Callable)


def setup_budget(seconds: float) -> Callable[[F], F]:
    """The fixture's set-up may take ``seconds`` (put it under ``@pytest.fixture``)."""
    def mark(fixture: F) -> F:
        fixture.setup_budget_s = float(seconds)
        return fixture
    return mark


def budget_of(fixture: Callable) -> float:
    return getattr(fixture, "setup_budget_s", DEFAULT_SETUP_BUDGET_S)
