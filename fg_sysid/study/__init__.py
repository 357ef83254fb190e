"""Comparison studies (issue 12): grids of simulate → identify → evaluate runs, local or on Dask.

`config` (YAML schema, grid expansion), `methods` (estimator registry), `runner` (one run, resumable
Parquet storage, process pool / Dask execution), `report` (tables and PNG plots).
"""

from .config import RunSpec, StudyConfig, StudyConfigError, load_config, parse_config
from .methods import METHODS, register_method
from .runner import read_rows, run_one, run_study

__all__ = ["METHODS", "RunSpec", "StudyConfig", "StudyConfigError", "load_config", "parse_config",
           "read_rows", "register_method", "run_one", "run_study"]
