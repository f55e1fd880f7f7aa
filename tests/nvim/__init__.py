# A package, so this folder's conftest.py does not take the module name
# `conftest` from tests/conftest.py (which other test modules import).
