"""The install, CI and Vagrant provisioning scripts are valid shell (they cannot boot a VM here)."""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["scripts/install.sh", "scripts/install_p4runtime_shell.sh", "vagrant/provision.sh", ".ci/run"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_parses_with_bash(script):
    result = subprocess.run(["bash", "-n", os.path.join(ROOT, script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_passes_shellcheck(script):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/install.sh installs it)")
    result = subprocess.run(["shellcheck", os.path.join(ROOT, script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_vagrantfile_provisions_with_the_checked_script():
    with open(os.path.join(ROOT, "Vagrantfile")) as handle:
        vagrantfile = handle.read()
    assert re.search(r'provision\s+"shell",\s*path:\s*"vagrant/provision.sh"', vagrantfile)
    assert "synced_folder" in vagrantfile


def test_provisioning_installs_the_p4_toolchain_and_project():
    with open(os.path.join(ROOT, "vagrant/provision.sh")) as handle:
        script = handle.read()
    for needed in ("p4lang-p4c", "p4lang-bmv2", "simple_switch_grpc", "mininet", "pip install", "-e"):
        assert needed in script, needed


def test_ci_runs_the_readme_test_command():
    with open(os.path.join(ROOT, "README.md")) as handle:
        readme = handle.read()
    with open(os.path.join(ROOT, ".ci/run")) as handle:
        ci = handle.read()
    test_command = "/opt/testbed-venv/bin/python -m pytest"
    assert test_command in readme
    assert test_command in ci
