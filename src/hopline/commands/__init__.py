"""The command-line front ends: ``hopline relay`` (:mod:`.relay`), and the commands
about the configuration file that are not part of it, ``hopline check`` (:mod:`.check`)
and ``hopline schema`` (:mod:`.schema`). Each has ``add_arguments`` and ``run`` (see
``hopline/cli.py``); they may use any package, the configuration included, where
``hopline.config`` itself imports no mode and no ACP code.
"""
