"""--elastic refuses local masters before Spark starts."""

from __future__ import annotations

import pytest

from adaptstream.errors import ConfigError
from adaptstream.spark.executors import check_elastic_master


@pytest.mark.parametrize("master", ["local[2]", "local", "LOCAL[*]"])
def test_local_is_refused(master):
    with pytest.raises(ConfigError, match="needs a cluster manager"):
        check_elastic_master(master)


def test_cluster_masters_pass():
    check_elastic_master("spark://127.0.0.1:7077")
    check_elastic_master("yarn")
