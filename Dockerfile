# syntax=docker/dockerfile:1
# hopline's container image: a wheel built in a first stage, installed with the extras asked for
# into a virtual environment in a slim runtime stage that runs as an unprivileged user.
#
#   docker build -t hopline:0.1.0 .                                  extras redis,auth; no Node
#   docker build --build-arg EXTRAS=all --build-arg NODE=true -t hopline:0.1.0-all .
#   docker run --rm -p 127.0.0.1:8000:8000 hopline:0.1.0            the demo at http://127.0.0.1:8000/mcp
#
# EXTRAS: pyproject.toml's optional extras, comma-separated (search, code, redis, otel, auth,
# cel, signin, acp), `all`, or empty for none. The default, redis,auth, runs the configuration the image
# ships (examples/container.yaml: alone, no Redis, no variables), replicas sharing state in
# Redis (examples/replicas.yaml, which deploy/kubernetes/ mounts) and JWT issuers. NODE=true adds
# Debian's Node.js and npm, for backends started with `npx` (they fetch their package at start,
# so the container needs to reach the npm registry; npm's cache goes to /tmp, the only writable
# place under Kubernetes' read-only root filesystem). Mount your own configuration at
# /etc/hopline/hopline.yaml. Checked offline by tests/deploy/test_deploy_dockerfile.py
# (hadolint, and the runtime stage's steps on a venv).

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim AS runtime
ARG EXTRAS=redis,auth
ARG NODE=false
# HOME: a writable place for what a backend caches (npx's packages), passed to stdio children.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/hopline \
    PATH=/opt/hopline/bin:$PATH \
    HOME=/tmp
# A system user with a fixed id, so that Kubernetes' runAsNonRoot can verify it.
RUN groupadd --system --gid 10001 hopline \
    && useradd --system --uid 10001 --gid hopline --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin hopline
COPY --from=build /wheels /wheels
# Node.js and npm (npx) from Debian, when NODE=true. DL3008 (pin versions): the base image's
# Debian release fixes them.
# hadolint ignore=DL3008
RUN if [ "$NODE" = true ]; then \
        apt-get update \
        && apt-get install -y --no-install-recommends nodejs npm \
        && rm -rf /var/lib/apt/lists/*; \
    elif [ "$NODE" != false ]; then \
        echo "NODE must be true or false, not '$NODE'" >&2 && exit 2; \
    fi
# The wheel by its path (never a package of that name from an index), with EXTRAS.
# DL3013 (pin versions): the wheel is the one just built; its dependencies are resolved within
# pyproject.toml's ranges, as for `pip install hopline[redis,auth]` (the project keeps no lock file).
# hadolint ignore=DL3013
RUN IFS=, && set -- $EXTRAS && unset IFS \
    && for extra; do \
        case "$extra" in search|code|redis|otel|auth|cel|signin|acp|all) ;; \
        *) echo "EXTRAS: no extra '$extra' (search, code, redis, otel, auth, cel, signin, acp or all)" >&2; exit 2 ;; esac; \
    done \
    && python -m venv /opt/hopline \
    && set -- /wheels/hopline-*.whl \
    && pip install --no-cache-dir "$1${EXTRAS:+[$EXTRAS]}" \
    && rm -rf /wheels
COPY examples/container.yaml /etc/hopline/hopline.yaml
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
