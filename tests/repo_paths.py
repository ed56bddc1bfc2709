"""Where the tests find the project's files, wherever in tests/ a test module lives."""
import os

#: tests/
TESTS = os.path.dirname(os.path.abspath(__file__))
#: the checkout's root (p4src/, experiments/, ...)
REPO = os.path.dirname(TESTS)
