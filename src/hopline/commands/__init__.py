"""CLI front ends and process wiring, outside the configuration and the modes:
``hopline check`` (:mod:`.check`), ``hopline schema`` (:mod:`.schema`), ``hopline relay``
(:mod:`.relay`) and ``hopline serve`` (:mod:`.serve`, whose gateway process is
:mod:`.serve_gateway`). Each command has ``add_arguments`` and ``run`` (see
``hopline/cli.py``); they may use any package, the configuration included, where
``hopline.config`` itself imports no mode and no ACP code.
"""
