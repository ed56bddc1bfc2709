"""ruff lints the tree with the configuration of pyproject.toml ([tool.ruff]); a violation fails the suite.

ruff comes with the test requirements (``pip install -e .[test]``, as scripts/install.sh does);
without it these tests skip, naming why.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                                reason="ruff is not installed (pip install -e .[test])")


def ruff_check(*paths):
    """``ruff check`` with the project's configuration, no cache left behind."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           os.path.join(ROOT, "pyproject.toml"), *paths],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_the_tree_passes_ruff():
    result = ruff_check(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_refuses_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\nVALUE = '" + "x" * 120 + "'\n")
    result = ruff_check(str(bad))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "F401" in result.stdout and "E501" in result.stdout
