#!/usr/bin/env bash
# Provision the Vagrant VM (Ubuntu 22.04): Mininet, BMv2 simple_switch_grpc and
# p4c from the P4 project's Ubuntu packages, then this project (editable) with
# os-ken and Scapy in /opt/testbed-venv (p4runtime-shell in /opt/p4runtime-shell-venv).
#
#   vagrant/provision.sh [PROJECT_DIR]     (Vagrant runs it as root with /vagrant)
set -euo pipefail

PROJECT_DIR=${1:-/vagrant}
VENV=/opt/testbed-venv
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
  echo "provision.sh: run as root" >&2
  exit 1
fi

# shellcheck disable=SC1091
. /etc/os-release
P4LANG_REPO="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}"

echo "== base packages"
apt-get update -q
apt-get install -y -q --no-install-recommends \
  ca-certificates curl gnupg mininet iproute2 bridge-utils tcpdump tshark iputils-ping iperf3 \
  ethtool procps psmisc net-tools python3-venv python3-dev python3-pip shellcheck git

echo "== P4 project packages (p4c, BMv2 with simple_switch_grpc) for Ubuntu ${VERSION_ID}"
if [ ! -f /etc/apt/trusted.gpg.d/home_p4lang.gpg ]; then
  curl -fsSL "${P4LANG_REPO}/Release.key" | gpg --dearmor > /etc/apt/trusted.gpg.d/home_p4lang.gpg
fi
echo "deb ${P4LANG_REPO}/ /" > /etc/apt/sources.list.d/home-p4lang.list
apt-get update -q
apt-get install -y -q p4lang-p4c p4lang-bmv2 p4lang-pi

for tool in p4c p4c-bm2-ss simple_switch_grpc simple_switch_CLI; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "provision.sh: $tool is missing after installing the P4 packages" >&2
    exit 1
  fi
done

echo "== Python environment and this project"
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade "pip>=23" "setuptools>=64" wheel
"$VENV/bin/python" -m pip install -q -e "${PROJECT_DIR}[test]"
"$VENV/bin/python" "$PROJECT_DIR/scripts/p4runtime_bindings.py"  # compiled protobuf backend
bash "$PROJECT_DIR/scripts/install_p4runtime_shell.sh"  # p4runtime-shell in its own venv
ln -sf "$VENV/bin/testbed" /usr/local/bin/testbed

echo "== netem available here (the emulation hosts without it fall back):"
modprobe sch_netem && echo "sch_netem loaded" || echo "sch_netem not available"

echo "== done: try 'sudo testbed net up fattree k=4 --program p4src/l3_ecmp.p4 --target bmv2'"
