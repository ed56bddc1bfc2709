"""Declarative experiments: a YAML spec in, a fabric run, results (JSON, CSV, PNG) out.

* :mod:`testbed.experiment.spec`: load and validate a spec (errors name the field path).
* :mod:`testbed.experiment.runner`: ``run_experiment(spec, out_dir)`` builds the fabric, starts
  switches and controller, runs traffic, applies the failure schedule, collects counters and
  receiver reports and always tears down.
* :mod:`testbed.experiment.results`: the results.json schema and the files a run writes.
* :mod:`testbed.experiment.plots`: PNG plots (matplotlib, Agg backend).
* :mod:`testbed.experiment.compare`: one spec under several modes, side by side.
"""
