"""Every host of a k=4 FatTree reaches every other through embedded P4 switches running ECMP."""
import pytest

from testbed.testing import assert_all_pairs_reachable


@pytest.mark.fabric("fattree", k=4, program="ecmp")
def test_every_pair_of_hosts_is_reachable(fabric):
    assert_all_pairs_reachable(fabric)
