"""Run with: python3 test_calc.py"""

from calc import mean, total


def test_total():
    assert total([1, 2, 3]) == 6


def test_mean():
    assert mean([1, 2, 3]) == 2, f"mean([1, 2, 3]) is {mean([1, 2, 3])}, expected 2"


if __name__ == "__main__":
    test_total()
    test_mean()
    print("all tests passed")
