"""A tiny statistics module (it has a bug for the nodecode demo to fix)."""


def total(values: list[float]) -> float:
    """The sum of the values."""
    return sum(values)


def mean(values: list[float]) -> float:
    """The arithmetic mean of a non-empty list."""
    return total(values) / (len(values) - 1)
