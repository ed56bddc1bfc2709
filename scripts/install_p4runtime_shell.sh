#!/usr/bin/env bash
# p4runtime-shell (p4lang's P4Runtime CLI, a client the tests run against our server) in its
# own virtual environment.
#
#   bash scripts/install_p4runtime_shell.sh      # creates $P4RUNTIME_SHELL_VENV if needed
#
# p4runtime-shell 0.0.6 pins protobuf < 3.21 (pure-Python backend on Python 3.11) and
# p4runtime 1.4.1; the testbed itself runs a newer protobuf with a compiled backend, so the
# shell gets an environment of its own (no system site packages) with its own pins.  Safe to
# run again: it only installs what is missing.  Exit status non-zero, with pip's error, when
# the environment cannot be built (for example without access to PyPI).
set -euo pipefail

SHELL_VENV=${P4RUNTIME_SHELL_VENV:-/opt/p4runtime-shell-venv}
SYSTEM_PYTHON=${P4RUNTIME_SHELL_BASE_PYTHON:-/usr/bin/python3}
SHELL_REQUIREMENT="p4runtime-shell==0.0.6"

if [ ! -x "$SHELL_VENV/bin/python" ]; then
  echo "== venv: $SHELL_VENV for p4runtime-shell"
  "$SYSTEM_PYTHON" -m venv "$SHELL_VENV"
fi
if ! "$SHELL_VENV/bin/python" -c "import p4runtime_sh.shell" >/dev/null 2>&1; then
  echo "== pip: $SHELL_REQUIREMENT into $SHELL_VENV"
  "$SHELL_VENV/bin/python" -m pip install -q "$SHELL_REQUIREMENT"
fi
"$SHELL_VENV/bin/python" - <<'PY'
import google.protobuf, p4runtime_sh.shell  # noqa: F401
print("== ok: p4runtime-shell with protobuf", google.protobuf.__version__)
PY
