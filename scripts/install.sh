#!/usr/bin/env bash
# Install everything the testbed needs on Debian 12 (run as root).
#
#   bash scripts/install.sh            # system packages + venv + this project (editable)
#
# Mininet comes from Debian and is built for Debian's /usr/bin/python3, so the
# Python dependencies go into a virtual environment on that interpreter with
# --system-site-packages (Mininet stays importable there).  The `testbed`
# command is linked into /usr/local/bin.  Safe to run again: it only adds what
# is missing.
set -euo pipefail

VENV=${TESTBED_VENV:-/opt/testbed-venv}
PROJECT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SYSTEM_PYTHON=/usr/bin/python3

APT_PACKAGES=(
  mininet iproute2 bridge-utils tcpdump tshark iputils-ping iperf3 ethtool
  procps psmisc net-tools kmod python3-venv python3-dev python3-pip shellcheck
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (Mininet needs it)" >&2
  exit 1
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "== venv: $VENV on $SYSTEM_PYTHON (with system site packages for Mininet)"
  "$SYSTEM_PYTHON" -m venv --system-site-packages "$VENV"
fi
echo "== pip: project and Python dependencies into $VENV"
"$VENV/bin/python" -m pip install -q --upgrade "pip>=23" "setuptools>=64" wheel
"$VENV/bin/python" -m pip install -q -e "${PROJECT_DIR}[test]"
ln -sf "$VENV/bin/testbed" /usr/local/bin/testbed

"$VENV/bin/python" - <<'PY'
import mininet.net, os_ken.base.app_manager, p4.v1.p4runtime_pb2, scapy.contrib.roce, testbed
print("== ok: testbed", testbed.__version__, "with Mininet, os-ken, P4Runtime protos and Scapy")
PY
