# syntax=docker/dockerfile:1
# hopline's container image: a wheel built in a first stage, installed with the redis extra
# into a virtual environment in a slim runtime stage that runs as an unprivileged user.
#
#   docker build -t hopline:0.1.0 .
#   docker run --rm -p 8000:8000 -e REDIS_URL=redis://redis:6379/0 -e HOPLINE_SESSION_KEY=... hopline:0.1.0
#
# The default configuration is examples/replicas.yaml, at /etc/hopline/hopline.yaml: mount
# your own there (deploy/kubernetes/ does it from a ConfigMap). Checked offline by
# tests/deploy/test_deploy_dockerfile.py (hadolint, and the runtime stage's steps on a venv).

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/hopline \
    PATH=/opt/hopline/bin:$PATH
# A system user with a fixed id, so that Kubernetes' runAsNonRoot can verify it.
RUN groupadd --system --gid 10001 hopline \
    && useradd --system --uid 10001 --gid hopline --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin hopline
COPY --from=build /wheels /wheels
# The wheel by its path (never a package of that name from an index), with the redis extra.
# DL3013 (pin versions): the wheel is the one just built; its dependencies are resolved within
# pyproject.toml's ranges, as for `pip install hopline[redis]` (the project keeps no lock file).
# hadolint ignore=DL3013
RUN python -m venv /opt/hopline \
    && set -- /wheels/hopline-*.whl \
    && pip install --no-cache-dir "$1[redis]" \
    && rm -rf /wheels
COPY examples/replicas.yaml /etc/hopline/hopline.yaml
USER 10001:10001
# A working directory the user cannot write: `python -m hopline.demo` puts it first on sys.path.
WORKDIR /opt/hopline
# 8000: MCP (listen.port, HOPLINE_PORT); 9100: the admin listener (/healthz, /readyz, /metrics;
# observability.metrics.port, HOPLINE_ADMIN_PORT). Publish only 8000 to clients.
EXPOSE 8000 9100
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('HOPLINE_ADMIN_PORT', '9100') + '/readyz', timeout=2)"]
ENTRYPOINT ["hopline"]
CMD ["serve", "/etc/hopline/hopline.yaml"]
